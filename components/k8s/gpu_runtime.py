"""The NVIDIA container runtime as pods reach it: one RuntimeClass name, shared by every GPU pod.

containerd runs a container with the NVIDIA runtime only when the pod names a RuntimeClass whose
handler is a runtime containerd knows, or when that runtime is containerd's default. We take the
GPU Operator's convention: a RuntimeClass `nvidia` whose handler `nvidia` is the runtime entry that
`nvidia-ctk runtime configure --runtime=containerd` writes into containerd's config (its default
`--nvidia-runtime-name`). The device plugin and every pod that asks for `nvidia.com/gpu` name it;
the node bootstrap makes sure containerd has that handler on GPU workers.
"""

NVIDIA_RUNTIME_CLASS = "nvidia"
"""Name of the RuntimeClass GPU pods set as `runtimeClassName`."""

NVIDIA_RUNTIME_HANDLER = "nvidia"
"""containerd runtime handler the RuntimeClass points at (`plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia`)."""

MINIMUM_NVIDIA_CONTAINER_TOOLKIT = "1.17.8"
"""The oldest NVIDIA Container Toolkit a node may run containers with. Older ones let a container
image reach host root through the toolkit's `createContainer` hook (CVE-2025-23266, "NVIDIAScape",
CVSS 9.0; and CVE-2025-23267 through its `update-ldcache` hook), fixed in 1.17.8 (NVIDIA security
bulletin of July 2025; GPU Operator 25.3.1). The node bootstrap refuses an older `nvidia-ctk`
and preflight refuses a GPU template that records one."""

DEVICE_LIST_STRATEGY = "volume-mounts"
"""How the device plugin tells the toolkit which GPUs a pod was allocated: `/dev/null` bind-mounted
at `/var/run/nvidia-container-devices/<GPU>` (k8s-device-plugin `--device-list-strategy`, env
`DEVICE_LIST_STRATEGY`). The GPU workers' toolkit takes the list only that way and ignores
`NVIDIA_VISIBLE_DEVICES` in unprivileged containers (`accept-nvidia-visible-devices-as-volume-mounts
= true`, `accept-nvidia-visible-devices-envvar-when-unprivileged = false`: the node bootstrap, or
the GPU Operator's toolkit values), so a pod gets the GPUs of its `nvidia.com/gpu` limit and no
more (NVIDIA GPU Operator docs, "Security Considerations: Preventing Unprivileged Access to GPUs")."""

ALL_GPUS_REQUEST_PATH = "/var/run/nvidia-container-devices/all"
"""Where a node add-on that watches every GPU (the device plugin, dcgm-exporter) asks for them all:
the toolkit reads a `/dev/null` mount there as the device list `all` (nvidia-container-toolkit
`internal/config/image/cuda_image.go`, `requestsFromMounts`). It is a hostPath, which Pod Security
baseline refuses, so only namespaces enforcing `privileged` (the add-ons' own) can ask this way;
it needs no capability, unlike upstream's chart, which adds SYS_ADMIN so the toolkit counts the
plugin as privileged and keeps honouring its image's `NVIDIA_VISIBLE_DEVICES=all`."""


def all_gpus_request() -> tuple[dict[str, object], dict[str, object]]:
    """(volume, volumeMount) that give a container every GPU of its node under the isolated toolkit."""
    volume: dict[str, object] = {"name": "nvidia-all-gpus", "hostPath": {"path": "/dev/null", "type": "CharDevice"}}
    mount: dict[str, object] = {"name": "nvidia-all-gpus", "mountPath": ALL_GPUS_REQUEST_PATH, "readOnly": True}
    return volume, mount
