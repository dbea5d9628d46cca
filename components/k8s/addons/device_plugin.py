"""NVIDIA GPUs for pods: the k8s-device-plugin DaemonSet, or the GPU Operator for vGPU guests.

Two ways to give pods `nvidia.com/gpu`:

- `mode="device-plugin"` (default): the guest image already has the NVIDIA vGPU guest driver and
  container toolkit; only the device plugin is deployed. The DaemonSet mirrors upstream's static
  manifest `deployments/static/nvidia-device-plugin.yml` of v0.20.0 (the hostPath for the
  kubelet's device-plugin socket directory, `allowPrivilegeEscalation: false` and
  `capabilities.drop: [ALL]`), placed in its own namespace and on GPU workers only. Two additions
  keep tenants from GPUs they did not ask for (issue 40 item 8): `DEVICE_LIST_STRATEGY=volume-mounts`,
  and a `/dev/null` hostPath at `/var/run/nvidia-container-devices/all`, the plugin's own request
  for every GPU, which the GPU workers' toolkit honours where it now ignores the image's
  `NVIDIA_VISIBLE_DEVICES=all` (components/k8s/gpu_runtime.py). Unlike
  upstream's example it runs under the RuntimeClass `nvidia` (components/k8s/gpu_runtime.py),
  which this mode creates: the NVIDIA runtime is containerd's handler `nvidia` on GPU workers, not
  its default, and only that runtime mounts the driver's NVML library the plugin needs to find
  GPUs. Without NVML the plugin exits (upstream's `--fail-on-init-error` defaults to true and
  v0.18 dropped `FAIL_ON_INIT_ERROR=false` from the static manifest, NVIDIA/k8s-device-plugin
  commit b3d0054): a broken runtime shows as a crash loop that Pulumi's DaemonSet await reports,
  not as a Running plugin advertising zero GPUs.
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
from components.k8s.gpu_runtime import (
    DEVICE_LIST_STRATEGY,
    NVIDIA_RUNTIME_CLASS,
    NVIDIA_RUNTIME_HANDLER,
    all_gpus_request,
)
from components.k8s.network_policy import deny_all_ingress
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
    """Namespace of the DaemonSet, created here enforcing Pod Security `privileged` (the kubelet's
    hostPath); default `nvidia-device-plugin`, its own so that exception covers nothing else."""
    image: str = DEVICE_PLUGIN_IMAGE
    """Device plugin image, pinned by tag; default `nvcr.io/nvidia/k8s-device-plugin:v0.20.0`
    (stack key `gpu.devicePluginImage`, e.g. a mirror for air-gapped sites)."""
    node_selector: Mapping[str, str] = field(default_factory=lambda: dict(GPU_NODE_LABEL))
    """Nodes the plugin runs on; default the GPU-worker label `nvidia.com/gpu.present=true`."""
    runtime_class_name: str | None = NVIDIA_RUNTIME_CLASS
    """RuntimeClass of the plugin's pods; default `nvidia`, the team's convention for every GPU
    pod (the bootstrap gives containerd that handler on GPU workers). None only where the NVIDIA
    runtime is containerd's default on every GPU worker (a template built with
    `nvidia-ctk runtime configure --set-as-default`): then no RuntimeClass is needed or created."""
    create_runtime_class: bool = True
    """Create the RuntimeClass `runtime_class_name` (handler `nvidia`, scheduled onto nodes labelled
    `nvidia.com/gpu.present=true`, the GPU workers whose containerd has that handler); default True. False when something else owns it (a cluster where the GPU
    Operator ran before: the operator takes over and rewrites an existing `nvidia` RuntimeClass)."""
    fail_on_init_error: bool = True
    """Default True (upstream's default since v0.18): a plugin that cannot load NVML exits and
    crash-loops, so `pulumi up` fails on the DaemonSet instead of reporting success with zero GPUs.
    False renders `FAIL_ON_INIT_ERROR=false` (the plugin idles without GPUs): only for mixed pools
    where some selected nodes have no GPU, and then nothing tells you a GPU node is broken."""

    def __post_init__(self) -> None:
        check_dns_label(self.namespace, "device plugin namespace")
        check_image(self.image, "device plugin image")
        if self.runtime_class_name is not None:
            check_dns_label(self.runtime_class_name, "device plugin runtime_class_name")
        if self.runtime_class_name is None and self.create_runtime_class:
            raise ValueError(
                "DevicePluginSettings: create_runtime_class needs runtime_class_name "
                "(or set create_runtime_class=False when the NVIDIA runtime is containerd's default)"
            )


def render_runtime_class(name: str, node_selector: Mapping[str, str]) -> dict[str, Any]:
    """The RuntimeClass GPU pods name, pointing at containerd's `nvidia` handler.

    `scheduling.nodeSelector` keeps every pod naming it on nodes that have the handler: the
    RuntimeClass admission plugin merges it into the pod's nodeSelector, so a GPU pod that forgot
    its own selector is not started on a node where containerd would fail the sandbox with "no
    runtime for nvidia is configured".
    """
    check_dns_label(name, "RuntimeClass name")
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name, "labels": app_labels("nvidia-runtime", "gpu-runtime-class")},
        "handler": NVIDIA_RUNTIME_HANDLER,
        "scheduling": {"nodeSelector": dict(node_selector)},
    }


def render_device_plugin(settings: DevicePluginSettings) -> list[dict[str, Any]]:
    """The `nvidia` RuntimeClass (unless owned elsewhere), the plugin's Namespace and DaemonSet."""
    labels = app_labels("nvidia-device-plugin", "gpu-device-plugin")
    all_gpus_volume, all_gpus_mount = all_gpus_request()
    # Pods get their GPUs as volume mounts, the only list the GPU workers' toolkit accepts from
    # an unprivileged container (gpu_runtime.DEVICE_LIST_STRATEGY); the plugin itself asks for
    # every GPU the same way, so it needs no SYS_ADMIN (upstream's chart adds it for this case).
    env = [{"name": "DEVICE_LIST_STRATEGY", "value": DEVICE_LIST_STRATEGY}]
    if not settings.fail_on_init_error:
        env.append({"name": "FAIL_ON_INIT_ERROR", "value": "false"})
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
                "env": env,
                "securityContext": {
                    "privileged": False,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [
                    {"name": "kubelet-device-plugins-dir", "mountPath": KUBELET_DEVICE_PLUGINS},
                    all_gpus_mount,
                ],
            }
        ],
        "volumes": [
            {
                "name": "kubelet-device-plugins-dir",
                "hostPath": {"path": KUBELET_DEVICE_PLUGINS, "type": "Directory"},
            },
            all_gpus_volume,
        ],
    }
    daemonset_metadata: dict[str, Any] = {
        "name": "nvidia-device-plugin",
        "namespace": settings.namespace,
        "labels": labels,
    }
    runtime_class: list[dict[str, Any]] = []
    if settings.runtime_class_name is not None:
        pod_spec["runtimeClassName"] = settings.runtime_class_name
        if settings.create_runtime_class:
            runtime_class.append(render_runtime_class(settings.runtime_class_name, GPU_NODE_LABEL))
            # The RuntimeClass admission plugin refuses pods naming a RuntimeClass that does not
            # exist yet: apply it first (yaml/v2 ConfigGroup ordering within the group).
            daemonset_metadata["annotations"] = {
                "config.kubernetes.io/depends-on": f"node.k8s.io/RuntimeClass/{settings.runtime_class_name}"
            }
    return [
        *runtime_class,
        namespace(
            settings.namespace,
            enforce="privileged",
            exception_reason=(
                "device plugin registers its socket in the kubelet's hostPath "
                f"{KUBELET_DEVICE_PLUGINS} and asks the NVIDIA toolkit for every GPU with a "
                "/dev/null hostPath; the container itself is not privileged and drops all capabilities"
            ),
        ),
        # It talks to the kubelet over a unix socket; nothing connects to it over the network.
        deny_all_ingress(settings.namespace),
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": daemonset_metadata,
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
