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
