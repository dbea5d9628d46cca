"""NVIDIA GPUs for pods: the k8s-device-plugin DaemonSet, or the GPU Operator for vGPU guests.

Two ways to give pods `nvidia.com/gpu`:

- `mode="device-plugin"` (default): the guest image already has the NVIDIA vGPU guest driver and
  container toolkit; only the device plugin is deployed. The DaemonSet mirrors upstream's static
  manifest `deployments/static/nvidia-device-plugin.yml` (same env, same single hostPath for the
  kubelet's device-plugin socket directory, same `allowPrivilegeEscalation: false` and
  `capabilities.drop: [ALL]`), placed in its own namespace and on GPU workers only.
- `mode="gpu-operator"`: the NVIDIA GPU Operator installs the vGPU guest driver from the user's
  private registry, licenses it, and runs its own device plugin (see `gpu_operator.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_kubernetes as k8s

from components.k8s.addons.gpu_operator import GpuOperator, GpuOperatorArgs
from components.k8s.objects import (
    GPU_NODE_LABEL,
    app_labels,
    check_dns_label,
    check_image,
    gpu_toleration,
    namespace,
    register_objects,
)

DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
KUBELET_DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"


@dataclass(frozen=True, kw_only=True)
class DevicePluginSettings:
    """What the static device-plugin DaemonSet is rendered from (plain values only)."""

    namespace: str = "nvidia-device-plugin"
    """Namespace of the DaemonSet; created here with Pod Security labels."""
    image: str = DEVICE_PLUGIN_IMAGE
    """Device plugin image, pinned by tag (upstream release v0.20.0)."""
    node_selector: Mapping[str, str] = field(default_factory=lambda: dict(GPU_NODE_LABEL))
    """Nodes the plugin runs on; default the GPU-worker label `nvidia.com/gpu.present=true`."""
    runtime_class_name: str | None = None
    """Set to the NVIDIA runtime class (e.g. `nvidia`) when the NVIDIA container runtime is not
    the container engine's default on GPU workers; default None (it is the default runtime)."""
    fail_on_init_error: bool = False
    """Upstream's static manifest sets `FAIL_ON_INIT_ERROR=false` so a node without a working
    driver keeps a running (idle) plugin instead of a crash loop; default False, as upstream."""

    def __post_init__(self) -> None:
        check_dns_label(self.namespace, "device plugin namespace")
        check_image(self.image, "device plugin image")


def render_device_plugin(settings: DevicePluginSettings) -> list[dict[str, Any]]:
    """The device plugin's Namespace and DaemonSet."""
    labels = app_labels("nvidia-device-plugin", "gpu-device-plugin")
    pod_spec: dict[str, Any] = {
        "nodeSelector": dict(settings.node_selector),
        "tolerations": [gpu_toleration()],
        # As upstream: a critical node add-on, so it is rescheduled first after a failure.
        "priorityClassName": "system-node-critical",
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "nvidia-device-plugin-ctr",
                "image": settings.image,
                "env": [
                    {
                        "name": "FAIL_ON_INIT_ERROR",
                        "value": "true" if settings.fail_on_init_error else "false",
                    }
                ],
                "securityContext": {
                    "privileged": False,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [{"name": "kubelet-device-plugins-dir", "mountPath": KUBELET_DEVICE_PLUGINS}],
            }
        ],
        "volumes": [
            {
                "name": "kubelet-device-plugins-dir",
                "hostPath": {"path": KUBELET_DEVICE_PLUGINS, "type": "Directory"},
            }
        ],
    }
    if settings.runtime_class_name:
        pod_spec["runtimeClassName"] = settings.runtime_class_name
    return [
        namespace(
            settings.namespace,
            enforce="privileged",
            exception_reason=(
                "device plugin registers its socket in the kubelet's hostPath "
                f"{KUBELET_DEVICE_PLUGINS}; the container itself is not privileged and drops "
                "all capabilities"
            ),
        ),
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": "nvidia-device-plugin",
                "namespace": settings.namespace,
                "labels": labels,
            },
            "spec": {
                "selector": {"matchLabels": labels},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        },
    ]


@dataclass(frozen=True, kw_only=True)
class GpuDevicePluginArgs:
    provider: k8s.Provider
    """The cluster's explicit Kubernetes provider; the only thing this component depends on."""
    mode: Literal["device-plugin", "gpu-operator"] = "device-plugin"
    """device-plugin (default): only the static device plugin, drivers are in the guest image;
    gpu-operator: the NVIDIA GPU Operator with the vGPU guest driver (needs `gpu_operator`)."""
    device_plugin: DevicePluginSettings = field(default_factory=DevicePluginSettings)
    """Settings of the static DaemonSet (mode device-plugin only; rejected when changed in mode
    gpu-operator); defaults as documented on `DevicePluginSettings`."""
    gpu_operator: GpuOperatorArgs | None = None
    """Required with mode gpu-operator, rejected otherwise; its `provider` must be `provider`."""

    def __post_init__(self) -> None:
        if self.mode == "gpu-operator" and self.device_plugin != DevicePluginSettings():
            raise ValueError(
                "GpuDevicePlugin: device_plugin settings do not apply with mode 'gpu-operator' "
                "(the operator runs its own device plugin); drop them or use mode 'device-plugin'"
            )
        if self.mode == "gpu-operator" and self.gpu_operator is None:
            raise ValueError("GpuDevicePlugin: mode 'gpu-operator' needs gpu_operator settings")
        if self.mode == "device-plugin" and self.gpu_operator is not None:
            raise ValueError(
                "GpuDevicePlugin: gpu_operator settings are only used with mode 'gpu-operator'; "
                "drop them or set mode='gpu-operator'"
            )
        if self.gpu_operator is not None and self.gpu_operator.provider is not self.provider:
            raise ValueError("GpuDevicePlugin: gpu_operator.provider must be the same provider as provider")


class GpuDevicePlugin(pulumi.ComponentResource):
    """Makes `nvidia.com/gpu` schedulable on GPU workers."""

    namespace: str
    """Namespace the GPU software runs in."""

    def __init__(self, name: str, args: GpuDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:GpuDevicePlugin", name, None, opts)
        if args.gpu_operator is not None:
            GpuOperator(f"{name}-operator", args.gpu_operator, pulumi.ResourceOptions(parent=self))
            self.namespace = args.gpu_operator.namespace
        else:
            register_objects(
                f"{name}-objects",
                render_device_plugin(args.device_plugin),
                parent=self,
                provider=args.provider,
            )
            self.namespace = args.device_plugin.namespace
        self.register_outputs({"namespace": self.namespace})
