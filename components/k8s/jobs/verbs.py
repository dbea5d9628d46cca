"""The user-space verbs provider a RoCE rank needs for the PVRDMA device, and how a job shows it.

libibverbs drives a device through a provider plug-in named after the kernel driver,
`libvmw_pvrdma-rdmav<ABI>.so` for `vmw_pvrdma` (rdma-core providers/vmw_pvrdma). Debian and
Ubuntu ship it in `ibverbs-providers` (rdma-core debian/ibverbs-providers.install:
`usr/lib/*/libibverbs/lib*-rdmav*.so`), RHEL in `libibverbs`. MOFED/DOCA-OFED's rdma-core, which
images built for Mellanox fabrics install from linux.mellanox.com (the fabric check's default
image does: coreweave/nccl-tests Dockerfile.ubuntu22), carries only the mlx providers; libibverbs
then says `couldn't load driver 'libvmw_pvrdma-rdmav34.so'` (seen in NVIDIA/nvshmem#51) and NCCL
finds no IB device.

The provider must match libibverbs' private ABI (`IBVERBS_PRIVATE_<n>`, a load error otherwise,
as in bytedance/byteps#313), so copying one file in is not enough: the image's whole rdma-core must
be the distribution's. Jobs install nothing at start (issue 34: air-gapped sites have no archive to
install from): the site image built from `images/site/Dockerfile` carries it, and a worker whose
image lacks the provider is named by the fabric check before it sweeps, instead of a sweep that
falls back to sockets and fails later for a reason the log hides.
"""

from __future__ import annotations

PROVIDER_GLOB = "/usr/lib/*/libibverbs/libvmw_pvrdma-rdmav*.so"

SITE_IMAGE_HINT = "an image with the distribution's rdma-core (images/site/Dockerfile, stack key jobs.siteImage)"

CHECK_AND_LIST_VERBS_DEVICES = (
    f"if ! ls {PROVIDER_GLOB} >/dev/null 2>&1; then "
    'echo "fabric check: $(hostname): this image has no vmw_pvrdma verbs provider '
    f'({PROVIDER_GLOB}), so NCCL would find no RDMA device; run the check on {SITE_IMAGE_HINT}" >&2; '
    "exit 3; fi; "
    'echo "verbs devices on $(hostname):"; ibv_devices'
)
"""What each worker runs before the sweep: refuse (exit 3) where the image lacks the provider,
else print the device names libibverbs can drive there (`ibv_devices`, ibverbs-utils), so a
renamed or missing device shows in the launcher log."""
