"""GPU monitoring: the dcgm-exporter, the minimal Prometheus, the GPU Operator's exporter values, and
the stack keys that choose them."""

from __future__ import annotations

import copy
import csv
import io
import os
from typing import Any

import pulumi_kubernetes as k8s
import pytest
import yaml

from components.k8s.addons.dcgm_exporter import (
    COUNTERS_KEY,
    HEALTH_COUNTERS,
    Counter,
    DcgmExporterSettings,
    operator_exporter_values,
    render_dcgm_exporter,
)
from components.k8s.addons.monitoring import GpuMonitoring, GpuMonitoringArgs
from components.k8s.addons.prometheus import PrometheusSettings, render_prometheus
from components.k8s.facts import DCGM_EXPORTER_IMAGE
from stacks.environment.loader import ENVIRONMENT_KEY, LICENSE_TOKEN_KEY, ConfigView, load_environment
from stacks.tools.plan.mock_runtime import run_program
from stacks.wiring import kubernetes as k8s_wiring
from tests.components.k8s.addons.k8s_checks import check_policy, pod_specs, validate_strict
from tests.program.conftest import run_view, stack_view

os.environ["PULUMI_ERROR_OUTPUT_STRING"] = "true"

RENDERED = {
    "exporter-annotations": lambda: render_dcgm_exporter(DcgmExporterSettings()),
    "exporter-service-monitor": lambda: render_dcgm_exporter(DcgmExporterSettings(scrape="service-monitor")),
    "prometheus": lambda: render_prometheus(PrometheusSettings()),
}


def by_kind(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [o for o in objs if o["kind"] == kind]
    return found


@pytest.mark.parametrize("which", sorted(RENDERED))
def test_every_built_in_object_is_valid_for_the_cluster_version(which: str) -> None:
    for obj in RENDERED[which]():
        if obj["apiVersion"] != "monitoring.coreos.com/v1":  # a CRD kind: checked below
            validate_strict(obj)


@pytest.mark.parametrize("which", sorted(RENDERED))
def test_house_rules(which: str) -> None:
    check_policy(RENDERED[which]())


def test_exporter_runs_on_gpu_workers_under_the_nvidia_runtime_without_capabilities() -> None:
    objs = render_dcgm_exporter(DcgmExporterSettings())
    [pod] = pod_specs(by_kind(objs, "DaemonSet"))
    [container] = pod["containers"]
    assert container["image"] == DCGM_EXPORTER_IMAGE == "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-ubuntu22.04"
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    # No SYS_ADMIN: only profiling counters need it, and we export none.
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    # It takes no GPU from the jobs: NVML through the runtime is enough to watch them all.
    assert "nvidia.com/gpu" not in str(container.get("resources"))
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["DCGM_EXPORTER_LISTEN"]["value"] == ":9400"
    assert container["args"] == ["-f", "/etc/dcgm-exporter/gpu-health.csv"]


def test_the_counters_are_the_health_fields_users_expect() -> None:
    objs = render_dcgm_exporter(DcgmExporterSettings())
    text = by_kind(objs, "ConfigMap")["data"][COUNTERS_KEY]
    rows = [r for r in csv.reader(io.StringIO(text), skipinitialspace=True) if r and not r[0].startswith("#")]
    assert [r[0] for r in rows] == [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_EXP_XID_ERRORS_COUNT",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
    ]
    assert {r[1] for r in rows} == {"gauge"}


def test_profiling_counters_are_refused() -> None:
    with pytest.raises(ValueError, match="profiling fields need CAP_SYS_ADMIN"):
        DcgmExporterSettings(counters=(*HEALTH_COUNTERS, Counter("DCGM_FI_PROF_SM_ACTIVE", "gauge", "SM")))


def test_annotations_mode_annotates_pods_and_service_monitor_mode_renders_one() -> None:
    annotated = render_dcgm_exporter(DcgmExporterSettings())
    template = by_kind(annotated, "DaemonSet")["spec"]["template"]
    assert template["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9400",
        "prometheus.io/path": "/metrics",
    }
    assert not [o for o in annotated if o["kind"] == "ServiceMonitor"]
    monitored = render_dcgm_exporter(DcgmExporterSettings(scrape="service-monitor"))
    assert "annotations" not in by_kind(monitored, "DaemonSet")["spec"]["template"]["metadata"]
    monitor, service = by_kind(monitored, "ServiceMonitor"), by_kind(monitored, "Service")
    # The ServiceMonitor selects the Service by its labels and names its port (prometheus-operator
    # CRD: spec.selector, spec.endpoints[].port is the Service port's *name*).
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [p["name"] for p in service["spec"]["ports"]]
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]


def test_prometheus_is_read_only_on_the_control_plane_and_restricted() -> None:
    objs = render_prometheus(PrometheusSettings())
    role = by_kind(objs, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    binding = by_kind(objs, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "prometheus"}]
    assert by_kind(objs, "Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    [pod] = pod_specs(by_kind(objs, "Deployment"))
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    config = yaml.safe_load(by_kind(objs, "ConfigMap")["data"]["prometheus.yml"])
    [job] = config["scrape_configs"]
    assert job["kubernetes_sd_configs"] == [{"role": "pod"}]
    keep = job["relabel_configs"][0]
    assert keep["source_labels"] == ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"]
    assert (keep["action"], keep["regex"]) == ("keep", "true")


def test_gpu_operator_runs_its_own_exporter_with_our_counters() -> None:
    values = operator_exporter_values("annotations")["dcgmExporter"]
    assert values["enabled"] is True
    assert values["config"]["name"] == "gpu-health-counters" and values["config"]["create"] is True
    assert "DCGM_FI_DEV_XID_ERRORS, gauge" in values["config"]["data"]
    assert "DCGM_EXP_XID_ERRORS_COUNT, gauge" in values["config"]["data"]
    assert values["annotations"]["prometheus.io/port"] == "9400"
    assert values["serviceMonitor"] == {"enabled": False}
    assert operator_exporter_values("service-monitor")["dcgmExporter"]["serviceMonitor"] == {"enabled": True}


def _env(edit: Any) -> Any:
    view = stack_view("dev")
    values = copy.deepcopy(dict(view.values))
    edit(values[ENVIRONMENT_KEY])
    return ConfigView(values=values, secret_keys=view.secret_keys | {LICENSE_TOKEN_KEY})


def test_stack_keys_choose_what_is_deployed() -> None:
    dev = load_environment(stack_view("dev"))
    cluster: Any = type("Cluster", (), {"provider": None})()  # the wiring only reads .provider
    args = k8s_wiring.monitoring_args(dev, cluster)
    assert args is not None and args.exporter is not None and args.prometheus is not None

    def operator(env: dict[str, Any]) -> None:
        env["gpu"] = {"mode": "gpu-operator", "gpuOperator": {"driverRepository": "r.example/n", "driverVersion": "1"}}
        env["monitoring"] = {"enabled": False}

    off = load_environment(_env(operator))
    assert k8s_wiring.monitoring_args(off, cluster) is None
    assert k8s_wiring.operator_monitoring_values(off) == {"dcgmExporter": {"enabled": False}}


def test_gpu_operator_chart_gets_the_exporter_values() -> None:
    def operator(env: dict[str, Any]) -> None:
        env["gpu"] = {"mode": "gpu-operator", "gpuOperator": {"driverRepository": "r.example/n", "driverVersion": "1"}}

    run = run_view(_env(operator), "dev")
    [chart] = [r for r in run.resources if r.type == "kubernetes:helm.sh/v4:Chart"]
    values = chart.redacted_inputs()["values"]
    assert values["dcgmExporter"]["config"]["name"] == "gpu-health-counters"
    # Our own exporter is not deployed next to the operator's.
    assert not [r for r in run.resources if r.name == "monitoring-exporter"]


def test_component_registers_the_objects_and_refuses_a_prometheus_that_cannot_scrape() -> None:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1\nkind: Config\n")
        GpuMonitoring(
            "monitoring",
            GpuMonitoringArgs(provider=provider, exporter=DcgmExporterSettings(), prometheus=PrometheusSettings()),
        )

    run = run_program(program, project="vsphere-gpu-cluster", stack="test", config={}, secret_keys=[])
    [component] = [r for r in run.resources if r.type == "gpucluster:kubernetes:GpuMonitoring"]
    groups = {r.name: r for r in run.resources if r.type == "kubernetes:yaml/v2:ConfigGroup"}
    assert set(groups) == {"monitoring-exporter", "monitoring-prometheus", "monitoring-network-policies"}
    assert all(g.parent == component.urn for g in groups.values())
    with pytest.raises(ValueError, match="ignores ServiceMonitors"):
        GpuMonitoringArgs(
            provider=None,  # type: ignore[arg-type]
            exporter=DcgmExporterSettings(scrape="service-monitor"),
            prometheus=PrometheusSettings(),
        )


# --- the ServiceMonitor's labels: what a Prometheus Operator install selects by --------------------


def _service_monitor_stack(
    labels: dict[str, str] | None, *, operator: bool = False, scrape: str = "service-monitor"
) -> Any:
    def edit(env: dict[str, Any]) -> None:
        env["monitoring"] = {"scrape": scrape, **({"serviceMonitorLabels": labels} if labels is not None else {})}
        if operator:
            env["gpu"] = {
                "mode": "gpu-operator",
                "gpuOperator": {"driverRepository": "r.example/n", "driverVersion": "1"},
            }

    if operator:
        return _env(edit)  # with the license token the operator mode needs
    view = stack_view("dev")
    values = copy.deepcopy(dict(view.values))
    edit(values[ENVIRONMENT_KEY])
    return ConfigView(values=values, secret_keys=view.secret_keys)


def test_the_service_monitor_carries_the_labels_a_kube_prometheus_stack_selects() -> None:
    env = load_environment(_service_monitor_stack({"release": "kube-prometheus-stack"}))
    cluster: Any = type("Cluster", (), {"provider": None})()
    args = k8s_wiring.monitoring_args(env, cluster)
    assert args is not None and args.exporter is not None
    monitor = by_kind(render_dcgm_exporter(args.exporter), "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert "release" not in monitor["spec"]["selector"]["matchLabels"]  # it still selects the exporter's Service
    operator = load_environment(_service_monitor_stack({"release": "kps"}, operator=True))
    values = k8s_wiring.operator_monitoring_values(operator)["dcgmExporter"]["serviceMonitor"]
    assert values == {"enabled": True, "additionalLabels": {"release": "kps"}}


def test_plan_says_which_selector_the_service_monitor_must_match() -> None:
    from stacks.tools.plan.scrape_note import scrape_lines

    [labelled] = scrape_lines(load_environment(_service_monitor_stack({"release": "kps"})))
    assert "ServiceMonitor gpu-monitoring/dcgm-exporter carries release: kps" in labelled
    assert "serviceMonitorSelector must match them" in labelled
    [bare] = scrape_lines(load_environment(_service_monitor_stack(None)))
    assert "carries no label for a Prometheus to select it by" in bare
    assert "kube-prometheus-stack selects `release: <its Helm release name>`" in bare
    assert "set monitoring.serviceMonitorLabels" in bare
    assert scrape_lines(load_environment(_service_monitor_stack(None, scrape="annotations"))) == []


@pytest.mark.parametrize(
    ("labels", "scrape", "says"),
    [
        ({"release": "kps"}, "annotations", "monitoring.serviceMonitorLabels: labels a ServiceMonitor"),
        ({"-bad": "kps"}, "service-monitor", "is not a Kubernetes label key"),
        ({"release": "no spaces"}, "service-monitor", "is not a Kubernetes label value"),
    ],
)
def test_service_monitor_labels_are_refused_where_unused_or_malformed(
    labels: dict[str, str], scrape: str, says: str
) -> None:
    from stacks.environment.loader import InvalidEnvironment

    with pytest.raises(InvalidEnvironment) as refused:
        load_environment(_service_monitor_stack(labels, scrape=scrape))
    assert any(says in problem and "serviceMonitorLabels" in problem for problem in refused.value.problems), (
        refused.value.problems
    )
