"""The add-ons' pure renderers: valid objects, least privilege, pinned images, rejected input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.k8s.addons.device_plugin import DevicePluginSettings, render_device_plugin
from components.k8s.addons.gpu_operator import driver_image_tag, visible_pod_templates
from components.k8s.addons.mpi_operator import (
    MpiOperatorSettings,
    render_mpi_operator,
)
from components.k8s.addons.rdma_plugin import (
    RdmaPluginSettings,
    RdmaResource,
    plugin_config,
    render_rdma_plugin,
)
from components.k8s.gpu_runtime import NVIDIA_RUNTIME_CLASS, NVIDIA_RUNTIME_HANDLER
from components.k8s.objects import check_image, gpu_runtime_fields, image_is_pinned, namespace
from tests.components.k8s.addons.k8s_checks import check_policy, containers, pod_specs, validate_strict

RENDERED = {
    "device-plugin": lambda: render_device_plugin(DevicePluginSettings()),
    "device-plugin-default-runtime": lambda: render_device_plugin(
        DevicePluginSettings(runtime_class_name=None, create_runtime_class=False)
    ),
    "device-plugin-idle-on-error": lambda: render_device_plugin(DevicePluginSettings(fail_on_init_error=False)),
    "rdma-plugin": lambda: render_rdma_plugin(RdmaPluginSettings()),
    "mpi-operator": lambda: render_mpi_operator(MpiOperatorSettings()),
}


def by_kind(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [o for o in objs if o["kind"] == kind]
    return found


@pytest.mark.parametrize("which", sorted(RENDERED))
def test_every_object_is_valid_for_the_cluster_version(which: str) -> None:
    for obj in RENDERED[which]():
        validate_strict(obj)


@pytest.mark.parametrize("which", sorted(RENDERED))
def test_house_rules(which: str) -> None:
    check_policy(RENDERED[which]())


def test_device_plugin_matches_upstream_static_manifest_and_runs_on_gpu_workers() -> None:
    objs = render_device_plugin(DevicePluginSettings())
    daemonset = by_kind(objs, "DaemonSet")
    [pod] = pod_specs(daemonset)
    [container] = pod["containers"]
    assert container["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    # As upstream's static manifest since v0.18: no FAIL_ON_INIT_ERROR=false, so a plugin that
    # cannot reach the driver crash-loops (and Pulumi's DaemonSet await fails) instead of idling.
    # Only the device-list strategy (issue 40 item 8, tests/components/k8s/addons/test_gpu_isolation.py).
    assert container["env"] == [{"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}]
    assert container["securityContext"] == {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod["volumes"] == [
        {
            "name": "kubelet-device-plugins-dir",
            "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"},
        },
        {"name": "nvidia-all-gpus", "hostPath": {"path": "/dev/null", "type": "CharDevice"}},
    ]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["priorityClassName"] == "system-node-critical"
    assert daemonset["metadata"]["namespace"] == "nvidia-device-plugin"
    assert by_kind(objs, "Namespace")["metadata"]["name"] == "nvidia-device-plugin"


def test_rdma_config_defaults_select_the_pvrdma_function() -> None:
    objs = render_rdma_plugin(RdmaPluginSettings())
    config = json.loads(by_kind(objs, "ConfigMap")["data"]["config.json"])
    assert config == {
        "periodicUpdateInterval": 300,
        "configList": [
            {
                "resourceName": "pvrdma",
                "resourcePrefix": "rdma",
                "rdmaHcaMax": 64,
                "selectors": {
                    "vendors": ["15ad"],
                    "deviceIDs": ["0820"],
                    "drivers": ["vmw_pvrdma"],
                },
            }
        ],
    }
    assert by_kind(objs, "ConfigMap")["metadata"]["name"] == "rdma-devices"
    assert RdmaResource().extended_resource == "rdma/pvrdma"


def test_rdma_config_carries_every_selector_when_given() -> None:
    resource = RdmaResource(
        resource_name="hca",
        resource_prefix="example.com",
        rdma_hca_max=10,
        vendors=("15b3",),
        device_ids=("1017",),
        drivers=("mlx5_core",),
        if_names=("ens224",),
        link_types=("ether",),
    )
    [entry] = plugin_config([resource], 60)["configList"]
    assert entry["selectors"] == {
        "vendors": ["15b3"],
        "deviceIDs": ["1017"],
        "drivers": ["mlx5_core"],
        "ifNames": ["ens224"],
        "linkTypes": ["ether"],
    }
    assert resource.extended_resource == "example.com/hca"


def test_rdma_plugin_is_least_privilege() -> None:
    objs = render_rdma_plugin(RdmaPluginSettings())
    daemonset = by_kind(objs, "DaemonSet")
    [pod] = pod_specs(daemonset)
    [container] = pod["containers"]
    assert container["securityContext"] == {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    host_paths = {v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    # Not the whole of /dev, as upstream mounts.
    assert host_paths == {
        "/var/lib/kubelet/device-plugins",
        "/var/lib/kubelet/plugins_registry",
        "/dev/infiniband",
    }
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/dev/infiniband"]["readOnly"] is True
    assert mounts["/k8s-rdma-shared-dev-plugin"]["readOnly"] is True
    assert pod["hostNetwork"] is True
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert container["image"] == "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3"


def test_namespaces_that_need_privileged_say_why_and_the_operator_is_restricted() -> None:
    for objs in (
        render_device_plugin(DevicePluginSettings()),
        render_rdma_plugin(RdmaPluginSettings()),
    ):
        ns = by_kind(objs, "Namespace")
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
        assert "not privileged" in ns["metadata"]["annotations"]["gpucluster.io/pod-security-exception"]
    ns = by_kind(render_mpi_operator(MpiOperatorSettings()), "Namespace")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert "annotations" not in ns["metadata"]


def test_mpi_operator_mirrors_upstream_release_manifest() -> None:
    objs = render_mpi_operator(MpiOperatorSettings())
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objs)
    assert kinds == [
        ("ClusterRole", "kubeflow-mpijobs-admin"),
        ("ClusterRole", "kubeflow-mpijobs-edit"),
        ("ClusterRole", "kubeflow-mpijobs-view"),
        ("ClusterRole", "mpi-operator"),
        ("ClusterRoleBinding", "mpi-operator"),
        ("Deployment", "mpi-operator"),
        ("Namespace", "mpi-operator"),
        ("NetworkPolicy", "deny-all-ingress"),  # ours, not upstream's (issue 37)
        ("ServiceAccount", "mpi-operator"),
    ]
    deployment = by_kind(objs, "Deployment")
    [container] = containers(deployment)
    assert container["image"] == "mpioperator/mpi-operator:0.8.2"
    assert container["args"] == ["-alsologtostderr", "--lock-namespace=mpi-operator"]
    binding = by_kind(objs, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mpi-operator", "namespace": "mpi-operator"}]
    [role] = [o for o in objs if o["metadata"]["name"] == "mpi-operator" and o["kind"] == "ClusterRole"]
    mpijob_rule = next(r for r in role["rules"] if r["apiGroups"] == ["kubeflow.org"])
    assert mpijob_rule["verbs"] == ["*"]
    # Upstream does not set these; Pod Security "restricted" needs them.
    [pod] = pod_specs(deployment)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_mpi_operator_namespace_follows_settings() -> None:
    objs = render_mpi_operator(MpiOperatorSettings(namespace="kubeflow"))
    [container] = containers(by_kind(objs, "Deployment"))
    assert "--lock-namespace=kubeflow" in container["args"]
    assert by_kind(objs, "ClusterRoleBinding")["subjects"][0]["namespace"] == "kubeflow"


def test_crd_source_is_the_vendored_copy_of_the_release() -> None:
    settings = MpiOperatorSettings()
    assert settings.crd_source == "manifests/mpi-operator/v0.8.0/mpijobs.kubeflow.org.crd.yaml"
    assert "://" not in MpiOperatorSettings(version="0.8.0").crd_source
    assert MpiOperatorSettings(crd_url="https://mirror.example/crd.yaml").crd_source == (
        "https://mirror.example/crd.yaml"
    )


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        ("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", True),
        ("registry.example:5000/team/image:1.2", True),
        ("registry.example:5000/team/image", False),
        ("horovod/horovod", False),
        ("horovod/horovod:latest", False),
        ("busybox@sha256:" + "0" * 64, True),
    ],
)
def test_image_pinning(image: str, pinned: bool) -> None:
    assert image_is_pinned(image) is pinned


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: DevicePluginSettings(image="nvcr.io/nvidia/k8s-device-plugin"), "not pinned"),
        (lambda: DevicePluginSettings(namespace="GPU_plugins"), "not a valid Kubernetes name"),
        (lambda: RdmaPluginSettings(image="ghcr.io/mellanox/x:latest"), "not pinned"),
        (lambda: RdmaPluginSettings(resources=()), "at least one resource"),
        (
            lambda: RdmaPluginSettings(resources=(RdmaResource(), RdmaResource())),
            "must be unique",
        ),
        (lambda: RdmaResource(resource_name="pv-rdma"), "letters, digits and '_'"),
        (lambda: RdmaResource(vendors=("0x15ad",)), "4-digit lower-case hex"),
        (
            lambda: RdmaResource(vendors=(), device_ids=(), drivers=()),
            "at least one selector",
        ),
        (lambda: MpiOperatorSettings(version="latest"), "pin version"),
        (lambda: MpiOperatorSettings(image="mpioperator/mpi-operator:latest"), "not pinned"),
        (lambda: MpiOperatorSettings(placement="gpu"), "placement must be"),  # type: ignore[arg-type]
        (lambda: DevicePluginSettings(runtime_class_name=None), "create_runtime_class needs runtime_class_name"),
        (lambda: DevicePluginSettings(runtime_class_name="NVIDIA"), "not a valid Kubernetes name"),
        (lambda: namespace("x", enforce="privileged"), "say why"),
        (lambda: namespace("x", enforce="baseline", exception_reason="no"), "only for"),
        (lambda: check_image("nginx", "image"), "not pinned"),
    ],
)
def test_bad_settings_are_rejected_before_anything_is_built(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_device_plugin_mode_creates_the_nvidia_runtime_class_and_runs_under_it() -> None:
    objs = render_device_plugin(DevicePluginSettings())
    runtime_class = by_kind(objs, "RuntimeClass")
    assert runtime_class["metadata"]["name"] == NVIDIA_RUNTIME_CLASS
    assert runtime_class["handler"] == NVIDIA_RUNTIME_HANDLER
    # Pods naming it land only where containerd has the handler.
    assert runtime_class["scheduling"] == {"nodeSelector": {"nvidia.com/gpu.present": "true"}}
    daemonset = by_kind(objs, "DaemonSet")
    [pod] = pod_specs(daemonset)
    assert pod["runtimeClassName"] == NVIDIA_RUNTIME_CLASS
    # Applied after the RuntimeClass: the API server refuses pods naming a missing one.
    assert daemonset["metadata"]["annotations"] == {
        "config.kubernetes.io/depends-on": "node.k8s.io/RuntimeClass/nvidia"
    }


def test_device_plugin_can_leave_the_runtime_class_to_the_default_runtime() -> None:
    objs = render_device_plugin(DevicePluginSettings(runtime_class_name=None, create_runtime_class=False))
    assert not [o for o in objs if o["kind"] == "RuntimeClass"]
    [pod] = pod_specs(by_kind(objs, "DaemonSet"))
    assert "runtimeClassName" not in pod
    [pod] = pod_specs(by_kind(render_device_plugin(DevicePluginSettings(fail_on_init_error=False)), "DaemonSet"))
    assert pod["containers"][0]["env"] == [
        {"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"},
        {"name": "FAIL_ON_INIT_ERROR", "value": "false"},
    ]


def test_gpu_pods_name_the_same_runtime_class() -> None:
    assert gpu_runtime_fields() == {"runtimeClassName": "nvidia"}


@pytest.mark.parametrize(
    ("settings", "selector"),
    [
        (MpiOperatorSettings(), {"node-role.kubernetes.io/control-plane": ""}),
        (MpiOperatorSettings(placement="any-node"), None),
    ],
)
def test_mpi_operator_is_placed_deliberately(settings: MpiOperatorSettings, selector: dict[str, str] | None) -> None:
    [pod] = pod_specs(by_kind(render_mpi_operator(settings), "Deployment"))
    assert pod.get("nodeSelector") == selector
    assert pod["tolerations"] == [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"}
    ]


@pytest.mark.parametrize(
    ("os_id", "version_id", "tag"),
    [
        # gpu-operator v26.7.0 getGPUNodeOSInfo: the minor is dropped for rocky, rhel and ol only.
        ("rocky", "9.4", "550.127.05-rocky9"),
        ("rhel", "9.4", "550.127.05-rhel9"),
        ("rhel", "8.10", "550.127.05-rhel8"),
        ("almalinux", "9.4", "550.127.05-almalinux9.4"),
        ("ubuntu", "22.04", "550.127.05-ubuntu22.04"),
    ],
)
def test_driver_image_tag_follows_the_operator(os_id: str, version_id: str, tag: str) -> None:
    assert driver_image_tag("550.127.05", os_id, version_id) == tag
    digest = "sha256:" + "a" * 64
    assert driver_image_tag(digest, os_id, version_id) == digest


def test_gpu_operator_values_name_the_runtime_class_and_home_nfd_gc() -> None:
    from components.k8s.addons.gpu_operator import GpuOperatorArgs, chart_values

    args = GpuOperatorArgs(
        provider=None,  # type: ignore[arg-type]  # chart_values never touches it
        driver_repository="r.example/nvidia",
        driver_version="550.127.05",
        licensing_token="t",
    )
    values = chart_values(args)
    assert values["operator"] == {"runtimeClass": NVIDIA_RUNTIME_CLASS}
    gc_tolerations = values["node-feature-discovery"]["gc"]["tolerations"]
    assert gc_tolerations == [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"}
    ]
    kinds = {(w["kind"], w["metadata"]["name"]) for w in visible_pod_templates(values, "gpu-operator")}
    assert ("Deployment", "nfd-gc") in kinds and ("DaemonSet", "gpu-operator-operands") in kinds
    assert len(visible_pod_templates({**values, "nfd": {"enabled": False}}, "gpu-operator")) == 2
