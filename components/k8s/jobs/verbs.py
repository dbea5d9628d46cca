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
as in bytedance/byteps#313), so copying one file in is not enough: the worker replaces the
image's whole rdma-core set with the distribution's, pinned above MOFED's (priority > 1000 lets
apt downgrade). Open MPI here starts ranks over TCP (`pml ob1`, `btl ^openib`, hcoll off) and NCCL
loads libibverbs itself, so nothing else in the image depends on MOFED's build. The step runs
only where the provider is missing, so an image that has it needs no egress.
"""

from __future__ import annotations

RDMA_CORE_PACKAGES = (
    "rdma-core libibverbs1 ibverbs-providers ibverbs-utils libibverbs-dev librdmacm1 librdmacm-dev "
    "rdmacm-utils libibumad3 libibumad-dev infiniband-diags libibmad5 libibnetdisc5"
)
"""rdma-core's Debian binary packages (rdma-core debian/control): pinned together, so apt
downgrades those MOFED installed as one consistent set."""

PROVIDER_GLOB = "/usr/lib/*/libibverbs/libvmw_pvrdma-rdmav*.so"

INSTALL_PVRDMA_PROVIDER = (
    f"{{ ls {PROVIDER_GLOB} >/dev/null 2>&1 || {{ "
    "printf 'Package: %s\\nPin: release o=Ubuntu\\nPin-Priority: 1001\\n' "
    f"'{RDMA_CORE_PACKAGES}' > /etc/apt/preferences.d/gpucluster-rdma-core && "
    "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
    "--allow-downgrades libibverbs1 ibverbs-providers ibverbs-utils; }; }"
)
"""A worker start step (bash, root, Ubuntu-based image): the vmw_pvrdma provider from Ubuntu's
archive unless the image has it. Needs egress to Ubuntu's mirror where it installs; without it,
use an image whose rdma-core is the distribution's."""

LIST_VERBS_DEVICES = 'echo "verbs devices on $(hostname):"; ibv_devices'
"""What each worker prints before the sweep (`ibv_devices`, ibverbs-utils): the device names
libibverbs can drive there, so a missing provider or a renamed device shows in the launcher log."""
