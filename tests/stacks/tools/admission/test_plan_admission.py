"""The admission check over real plans and rendered add-ons: every shipped stack runs where it is
meant to, and what would hang in a real cluster (issue 13, defects 1 and 2) is refused."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.k8s.addons.device_plugin import DevicePluginSettings, render_device_plugin
from components.k8s.addons.mpi_operator import MpiOperatorSettings, render_mpi_operator
from components.k8s.addons.rdma_plugin import RdmaPluginSettings, render_rdma_plugin
from stacks.environment.loader import ENVIRONMENT_KEY, LICENSE_TOKEN_KEY, ConfigView, load_environment
from stacks.environment.model import Environment
from stacks.tools.plan.admission.check import AdmissionReport, admission_report, check, driver_image_note, plan_objects
from stacks.tools.plan.admission.nodes import cluster_model
from stacks.tools.plan.admission.rules import RuntimeClassModel
from tests.program.conftest import run_view, stack_view
from tests.stack_fixtures import fixture_stack
from tests.stacks.conftest import cli

STACKS = ("dev", "staging", "prod", "sim")
ROOT = Path(__file__).resolve().parents[4]
__all__ = ["cli"]  # the fixture, imported for pytest
GPU_OPERATOR = {"driverRepository": "registry.example/nvidia", "driverVersion": "550.127.05"}


def _view(stack: str, edit: Callable[[dict[str, Any]], None] | None = None, *secrets: str) -> ConfigView:
    view = stack_view(stack)
    values = copy.deepcopy(dict(view.values))
    if edit:
        edit(values[ENVIRONMENT_KEY])
    return ConfigView(values=values, secret_keys=view.secret_keys | frozenset(secrets))


def _report(view: ConfigView, stack: str = "dev") -> AdmissionReport:
    return admission_report(load_environment(view), run_view(view, stack))


def _verdict(report: AdmissionReport, workload: str) -> str:
    [line] = [str(v) for v in report.verdicts if v.workload == workload]
    return line


@pytest.fixture(scope="module")
def dev_env() -> Environment:
    return load_environment(stack_view("dev"))


@pytest.mark.parametrize("stack", STACKS)
def test_every_shipped_stack_is_admitted(stack: str) -> None:
    report = _report(stack_view(stack), stack)
    assert report.failures == [], report.lines()
    env = load_environment(stack_view(stack))
    workers = len(env.gpu_workers.nodes)
    assert _verdict(report, "Deployment mpi-operator/mpi-operator").startswith("OK")
    # The operator runs on a control-plane node, never on a GPU worker.
    operator = _verdict(report, "Deployment mpi-operator/mpi-operator")
    assert any(node.name in operator for node in env.control_plane.nodes), operator
    plugin = _verdict(report, "DaemonSet nvidia-device-plugin/nvidia-device-plugin")
    assert f"runs on {workers} of {workers + len(env.control_plane.nodes)} nodes" in plugin
    assert f"advertises nvidia.com/gpu x{workers}" in plugin
    rdma = _verdict(report, "DaemonSet rdma-device-plugin/rdma-shared-dp-ds")
    assert f"advertises rdma/pvrdma x{workers * env.rdma.hca_max}" in rdma


def test_the_operator_as_rendered_runs_on_the_control_plane(dev_env: Environment) -> None:
    """Issue 13.1: fails on the old renderer, whose Deployment tolerated neither taint."""
    report = check(cluster_model(dev_env), render_mpi_operator(MpiOperatorSettings()), [])
    assert [str(v) for v in report.verdicts] == ["OK   Deployment mpi-operator/mpi-operator: 1 pod(s) on master"]


def test_upstreams_operator_deployment_is_refused_naming_every_taint(dev_env: Environment) -> None:
    objs = render_mpi_operator(MpiOperatorSettings())
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    del pod["nodeSelector"], pod["tolerations"]  # as upstream's manifest (and our old renderer)
    [verdict] = check(cluster_model(dev_env), objs, []).verdicts
    assert verdict.status == "FAIL"
    assert "master: untolerated taint node-role.kubernetes.io/control-plane:NoSchedule" in verdict.detail
    assert "untolerated taint nvidia.com/gpu=present:NoSchedule" in verdict.detail


def test_any_node_placement_still_finds_the_control_plane(dev_env: Environment) -> None:
    objs = render_mpi_operator(MpiOperatorSettings(placement="any-node"))
    [verdict] = check(cluster_model(dev_env), objs, []).verdicts
    assert str(verdict) == "OK   Deployment mpi-operator/mpi-operator: 1 pod(s) on master"


def test_the_device_plugin_as_rendered_advertises_the_gpus(dev_env: Environment) -> None:
    """Issue 13.2: fails on the old renderer, whose plugin ran under runc and found no NVML."""
    objs = render_device_plugin(DevicePluginSettings())
    report = check(cluster_model(dev_env), objs, _runtime_classes(objs))
    assert [v.status for v in report.verdicts] == ["OK"], report.lines()
    assert "advertises nvidia.com/gpu x4" in report.verdicts[0].detail


def test_a_device_plugin_under_runc_advertises_nothing_and_gpu_jobs_cannot_start(dev_env: Environment) -> None:
    objs = render_device_plugin(DevicePluginSettings(runtime_class_name=None, create_runtime_class=False))
    objs += render_rdma_plugin(RdmaPluginSettings())
    objs += [o for o in _plan_objs(stack_view("dev"))[0] if isinstance(o, dict) and o.get("kind") == "MPIJob"]
    # The RuntimeClass exists (the jobs name it), but the plugin itself runs under runc.
    runtime_classes = _runtime_classes(render_device_plugin(DevicePluginSettings()))
    report = check(cluster_model(dev_env), objs, runtime_classes)
    plugin = _verdict(report, "DaemonSet nvidia-device-plugin/nvidia-device-plugin")
    assert plugin.startswith("FAIL") and "cannot load NVML" in plugin
    job = _verdict(report, "MPIJob training/nccl-fabric-check-roce")
    assert job.startswith("FAIL") and "nvidia.com/gpu: requests 1, 0 free" in job


def test_a_gpu_daemonset_on_no_gpu_node_fails(dev_env: Environment) -> None:
    objs = render_device_plugin(DevicePluginSettings(node_selector={"nvidia.com/gpu.product": "A100"}))
    report = check(cluster_model(dev_env), objs, _runtime_classes(objs))
    [verdict] = report.verdicts
    assert verdict.status == "FAIL" and "runs on no node" in verdict.detail
    assert "has no label nvidia.com/gpu.product" in verdict.detail


def test_a_gpu_daemonset_missing_some_gpu_workers_fails(dev_env: Environment) -> None:
    objs = render_device_plugin(DevicePluginSettings(node_selector={"kubernetes.io/hostname": "worker-1"}))
    report = check(cluster_model(dev_env), objs, _runtime_classes(objs))
    [verdict] = report.verdicts
    assert verdict.status == "FAIL"
    assert "runs on 1 of 5 nodes (worker-1); not on worker-2, worker-3, worker-4" in str(verdict)


def _runtime_classes(objs: list[dict[str, Any]]) -> list[RuntimeClassModel]:
    return [RuntimeClassModel.from_object(o) for o in objs if o["kind"] == "RuntimeClass"]


def _plan_objs(view: ConfigView) -> tuple[list[Any], list[RuntimeClassModel]]:
    return plan_objects(run_view(view, "dev"))


def test_an_mpijob_must_fit_whole(dev_env: Environment) -> None:
    objs, runtime_classes = _plan_objs(stack_view("dev"))
    job = copy.deepcopy(next(o for o in objs if isinstance(o, dict) and o.get("kind") == "MPIJob"))
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 5  # one more than there are GPU workers
    others = [o for o in objs if not (isinstance(o, dict) and o.get("kind") == "MPIJob")]
    report = check(cluster_model(dev_env), [*others, job], runtime_classes)
    verdict = _verdict(report, f"MPIJob training/{job['metadata']['name']}")
    assert verdict.startswith("FAIL")
    assert "Worker 5 of 5 fits no node" in verdict
    assert "master: nodeSelector nvidia.com/gpu.present='true': node has no label nvidia.com/gpu.present" in verdict
    # Each 4-vCPU worker holds one 2-CPU job worker and the dcgm-exporter (100m), so the CPU runs out
    # before the GPU does; either is named first, both mean the fifth worker fits nowhere.
    assert "worker-1, worker-2 and 2 more: cpu: requests 2000m, 1900m free" in verdict


def test_workers_too_small_for_the_job_are_refused() -> None:
    view = _view("dev", lambda env: env["gpuWorkers"].update(memoryMb=4096))
    report = _report(view)
    names = {v.workload for v in report.failures}
    assert names == {"MPIJob training/nccl-fabric-check-roce"}  # dev's one enabled job
    assert all("memory: requests 8192Mi" in v.detail for v in report.failures)


def test_gpu_operator_mode_is_admitted_and_nfd_gc_gets_a_home() -> None:
    view = _view("dev", lambda env: env["gpu"].update(mode="gpu-operator", gpuOperator=GPU_OPERATOR), LICENSE_TOKEN_KEY)
    report = _report(view)
    assert report.failures == [], report.lines()
    lines = "\n".join(report.lines())
    assert "Deployment gpu-operator/gpu-operator: 1 pod(s) on master" in lines
    assert "Deployment gpu-operator/nfd-gc: 1 pod(s) on master" in lines
    assert "DaemonSet gpu-operator/nfd-worker: runs on 5 of 5 nodes" in lines
    assert "DaemonSet gpu-operator/gpu-operator-operands: runs on 4 of 5 nodes" in lines
    assert report.lines()[-1] == (
        "note: the GPU Operator will pull registry.example/nvidia/driver:550.127.05-rocky9 for "
        "vcenter.templateOs rocky9: push the vGPU guest driver image under that tag"
    )
    # No RuntimeClass of ours: the operator creates `nvidia` and would take over one of that name.
    objs, runtime_classes = _plan_objs(view)
    assert not [o for o in objs if isinstance(o, dict) and o.get("kind") == "RuntimeClass"]
    assert [rc.name for rc in runtime_classes] == ["nvidia"]


def test_existing_clusters_say_what_was_assumed() -> None:
    from stacks.environment.loader import KUBECONFIG_KEY

    view = _view("dev", lambda env: env["kubernetes"].update(mode="existing"), KUBECONFIG_KEY)
    report = _report(view)
    assert report.failures == []
    [assumed] = report.assumptions
    assert "kubernetes.mode is 'existing'" in assumed and "assumed" in assumed
    assert report.lines()[0].startswith("assumed: ")
    document = report.as_dict()
    assert document["admitted"] is True and document["assumptions"] == [assumed]
    assert {"status": "OK", "workload": "Deployment mpi-operator/mpi-operator", "detail": "1 pod(s) on master"} in (
        document["verdicts"]
    )


def test_plan_prints_a_verdict_per_workload_and_refuses_one_that_cannot_run(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    text = (fixture_stack("dev")).read_text()
    assert text.count("      memoryMb: 24576\n") == 1
    small = tmp_path / "Pulumi.small.yaml"
    small.write_text(text.replace("      memoryMb: 24576\n", "      memoryMb: 4096\n"))
    good = cli("plan", "dev", "--out", tmp_path / "good")
    assert good.returncode == 0, good.stderr
    assert "OK   Deployment mpi-operator/mpi-operator: 1 pod(s) on master" in good.stdout
    bad = cli("plan", "small", "--file", small, "--out", tmp_path / "bad")
    assert bad.returncode == 2
    assert "FAIL MPIJob training/nccl-fabric-check-roce: Worker 1 of 4 fits no node" in bad.stdout
    assert "error: 1 workload(s) cannot run: MPIJob training/nccl-fabric-check-roce" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_jobs_that_fit_only_one_at_a_time_are_reported(dev_env: Environment) -> None:
    # `validate` refuses enabled jobs whose GPUs do not fit together (jobs rule); the check still
    # says so for objects that get past it, e.g. a second copy of dev's fabric check.
    objs, runtime_classes = _plan_objs(stack_view("dev"))
    [mpijob] = [o for o in objs if isinstance(o, dict) and o.get("kind") == "MPIJob"]
    twin = copy.deepcopy(mpijob)
    twin["metadata"]["name"] = "nccl-fabric-check-twin"
    report = check(cluster_model(dev_env), [*objs, twin], runtime_classes)
    together = "training/nccl-fabric-check-roce + training/nccl-fabric-check-twin"
    verdict = _verdict(report, together)
    assert verdict.startswith("WARN") and "not all at once" in verdict
    assert _verdict(_report(stack_view("dev")), "MPIJob training/nccl-fabric-check-roce").startswith("OK")


@pytest.mark.parametrize(
    ("template_os", "tag"),
    [("rocky9", "570.1-rocky9"), ("rhel8", "570.1-rhel8"), ("alma9", "570.1-almalinux9.<minor>")],
)
def test_the_driver_tag_note_follows_the_template_os(template_os: str, tag: str) -> None:
    def edit(env: dict[str, Any]) -> None:
        env["gpu"].update(mode="gpu-operator", gpuOperator={**GPU_OPERATOR, "driverVersion": "570.1"})
        env["vcenter"]["templateOs"] = template_os

    env = load_environment(_view("dev", edit, LICENSE_TOKEN_KEY))
    assert f"registry.example/nvidia/driver:{tag} " in str(driver_image_note(env))
    assert driver_image_note(load_environment(stack_view("dev"))) is None


def _cp_workload(kind: str, count: int) -> dict[str, Any]:
    pod = {
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
        "containers": [{"name": "c", "image": "x:1", "resources": {"requests": {"cpu": "1500m"}}}],
    }
    spec: dict[str, Any] = {"template": {"spec": pod}}
    spec["replicas" if kind == "Deployment" else "parallelism"] = count
    return {"kind": kind, "metadata": {"name": "w", "namespace": "n"}, "spec": spec}


@pytest.mark.parametrize("kind", ["Deployment", "Job"])
def test_replicas_that_run_at_once_are_summed(dev_env: Environment, kind: str) -> None:
    # dev's control plane has 4 vCPUs: two pods of 1.5 CPU fit, the third does not.
    [ok] = check(cluster_model(dev_env), [_cp_workload(kind, 2)], []).verdicts
    assert str(ok) == f"OK   {kind} n/w: 2 pod(s) on master"
    [refused] = check(cluster_model(dev_env), [_cp_workload(kind, 3)], []).verdicts
    assert str(refused) == (
        f"FAIL {kind} n/w: pod 3 of 3 fits no node: worker-1, worker-2 and 2 more: nodeSelector "
        "node-role.kubernetes.io/control-plane='': node has no label node-role.kubernetes.io/control-plane; "
        "master: cpu: requests 1500m, 1000m free"
    )


def _exporter_report(dev_env: Environment, edit: Callable[[dict[str, Any]], None]) -> str:
    from components.k8s.addons.dcgm_exporter import DcgmExporterSettings, render_dcgm_exporter

    objs = render_dcgm_exporter(DcgmExporterSettings())
    daemonset = next(o for o in objs if o["kind"] == "DaemonSet")
    edit(daemonset["spec"]["template"]["spec"])
    report = check(cluster_model(dev_env), objs, _runtime_classes(render_device_plugin(DevicePluginSettings())))
    return _verdict(report, "DaemonSet gpu-monitoring/dcgm-exporter")


def test_the_dcgm_exporter_as_rendered_runs_on_every_gpu_worker(dev_env: Environment) -> None:
    verdict = _exporter_report(dev_env, lambda pod: None)
    assert verdict == (
        "OK   DaemonSet gpu-monitoring/dcgm-exporter: runs on 4 of 5 nodes (worker-1, worker-2 and 2 more); "
        "watches 4 GPU worker(s)"
    )


def test_a_dcgm_exporter_missing_gpu_workers_fails(dev_env: Environment) -> None:
    verdict = _exporter_report(dev_env, lambda pod: pod.update(nodeSelector={"kubernetes.io/hostname": "worker-1"}))
    assert verdict.startswith("FAIL"), verdict
    assert "not on worker-2, worker-3, worker-4, whose GPUs it should watch" in verdict


def test_a_dcgm_exporter_under_runc_sees_no_gpu(dev_env: Environment) -> None:
    verdict = _exporter_report(dev_env, lambda pod: pod.pop("runtimeClassName"))
    assert verdict.startswith("FAIL") and "cannot load NVML" in verdict, verdict


@pytest.mark.parametrize("stack", STACKS)
def test_every_shipped_stack_watches_every_gpu_worker(stack: str) -> None:
    report = _report(stack_view(stack), stack)
    env = load_environment(stack_view(stack))
    workers = len(env.gpu_workers.nodes)
    exporter = _verdict(report, "DaemonSet gpu-monitoring/dcgm-exporter")
    assert exporter.startswith("OK") and f"watches {workers} GPU worker(s)" in exporter, exporter
