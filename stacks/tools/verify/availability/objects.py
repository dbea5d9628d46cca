"""Pure pieces of `stacks verify --availability`: the probe pod it runs, where the device plugin's
pods are, and what it reads from Pod and Node objects."""

from __future__ import annotations

from typing import Any

from components.k8s.addons.device_plugin import DevicePluginSettings
from components.k8s.addons.gpu_operator import GpuOperatorArgs, validator_image
from components.k8s.facts import GPU_RESOURCE
from components.k8s.mirror import mirrored_image
from components.k8s.objects import app_labels, gpu_runtime_fields, gpu_toleration
from stacks.environment.model import Environment
from stacks.tools.verify.gpu_nodes import PodSet

PROBE_NAME = "gpu-availability-probe"
PROBE_LABELS = app_labels(PROBE_NAME, "availability-check")
OPERATOR_PLUGIN_SELECTOR = "app=nvidia-device-plugin-daemonset"
"""The GPU Operator's device-plugin pods (NVIDIA/gpu-operator
`assets/state-device-plugin/0500_daemonset.yaml`)."""


def device_plugin_pods(env: Environment) -> PodSet:
    """Where the stack's NVIDIA device-plugin pods run (components/k8s/addons/device_plugin.py, or
    the GPU Operator's)."""
    if env.gpu.mode == "gpu-operator":
        return PodSet(GpuOperatorArgs.namespace, OPERATOR_PLUGIN_SELECTOR)
    labels = app_labels("nvidia-device-plugin", "gpu-device-plugin")
    return PodSet(DevicePluginSettings.namespace, ",".join(f"{k}={v}" for k, v in labels.items()))


def probe_image(env: Environment) -> str:
    """An image with `sleep` that every GPU worker has pulled already (module `probe_pod`)."""
    if env.gpu.mode == "gpu-operator" and env.gpu.gpu_operator is not None:
        # The operator runs the distroless dcgm-exporter build, which has no `sleep`; its validator
        # runs on every GPU node with a shell and `sleep infinity`.
        return validator_image(env.gpu.gpu_operator.chart_version)
    return env.monitoring.exporter_image


def probe_pod(env: Environment, node: str | None) -> dict[str, Any]:
    """A pod holding one GPU and doing nothing, the stand-in for a running training container.

    Its image (`probe_image`) is pinned and already on every GPU worker: in gpu.mode device-plugin
    the stack's dcgm-exporter image (the Ubuntu build, with `sleep`; pulled when monitoring is on);
    in gpu.mode gpu-operator the operator's validator image, since the operator's own exporter is
    the distroless build without `sleep`. It runs as nobody with no capabilities (Pod Security
    `restricted`), so the jobs' namespace admits it whatever level it enforces.
    """
    spec: dict[str, Any] = {
        **gpu_runtime_fields(),
        "tolerations": [gpu_toleration()],
        "restartPolicy": "Always",
        # `sleep` as PID 1 ignores SIGTERM: without this, deleting the probe waits 30 s.
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": "probe",
                "image": mirrored_image(probe_image(env), env.mirror.registry),
                "command": ["sleep", "infinity"],
                "resources": {"limits": {GPU_RESOURCE: "1"}, "requests": {"cpu": "10m", "memory": "16Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
    }
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": PROBE_NAME, "namespace": env.jobs.namespace, "labels": dict(PROBE_LABELS)},
        "spec": spec,
    }


def pod_running(pod: dict[str, Any]) -> bool:
    """Running with every container ready."""
    status = pod.get("status", {})
    containers = status.get("containerStatuses", [])
    return status.get("phase") == "Running" and bool(containers) and all(c.get("ready") for c in containers)


def restarts(pod: dict[str, Any]) -> int:
    return sum(int(c.get("restartCount", 0)) for c in pod.get("status", {}).get("containerStatuses", []))


def describe_pod(pod: dict[str, Any]) -> str:
    """Phase and the first waiting reason, e.g. `Pending (ContainerCreating)`."""
    status = pod.get("status", {})
    waiting = [
        c["state"]["waiting"].get("reason", "waiting")
        for c in status.get("containerStatuses", [])
        if "waiting" in c.get("state", {})
    ]
    return status.get("phase", "Unknown") + (f" ({waiting[0]})" if waiting else "")


def ready_condition(node: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(
        (c for c in node.get("status", {}).get("conditions", []) if c.get("type") == "Ready"), {}
    )
    return found


def gpus(node: dict[str, Any], which: str) -> int:
    """`capacity` or `allocatable` nvidia.com/gpu (an integer extended resource)."""
    return int(node.get("status", {}).get(which, {}).get(GPU_RESOURCE, "0"))


def describe_node(node: dict[str, Any]) -> str:
    ready = ready_condition(node)
    return (
        f"Ready {ready.get('status', 'Unknown')} ({ready.get('reason', '-')}), "
        f"{GPU_RESOURCE} {gpus(node, 'allocatable')} allocatable of {gpus(node, 'capacity')}"
    )
