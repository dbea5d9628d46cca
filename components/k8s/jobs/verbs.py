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
    'sources=$(mktemp -d) && { cp /etc/apt/sources.list.d/ubuntu.sources "$sources"/ 2>/dev/null || true; } && '
    'apt-get -o Dir::Etc::SourceParts="$sources" update -qq && '
    'DEBIAN_FRONTEND=noninteractive apt-get -o Dir::Etc::SourceParts="$sources" install -y -qq '
    "--no-install-recommends --allow-downgrades libibverbs1 ibverbs-providers ibverbs-utils; } || "
    "echo 'gpucluster: could not install the vmw_pvrdma verbs provider (no route to the Ubuntu archive?); "
    "NCCL will find no RDMA device and the fabric check will say so' >&2; }"
)
"""A worker start step (bash, root, Ubuntu-based image): the vmw_pvrdma provider from Ubuntu's
archive unless the image has it. Only the distribution's own sources are read (`sources.list`, and
`ubuntu.sources` on 24.04): the image also lists MOFED's and CUDA's repositories, and one that
cannot be reached fails `apt-get update` (exit 100). Best effort: a failure is reported and sshd
starts anyway. In mpi-operator v0.8 the launcher starts only once every worker is Ready and a
worker that exited (restartPolicy Never) fails nothing, so a fatal step would leave the MPIJob
waiting for ever; this way the sweep runs and the verdict names the missing device. Needs egress
to Ubuntu's mirror where it installs; without it, use an image whose rdma-core is the
distribution's."""

LIST_VERBS_DEVICES = 'echo "verbs devices on $(hostname):"; ibv_devices'
"""What each worker prints before the sweep (`ibv_devices`, ibverbs-utils): the device names
libibverbs can drive there, so a missing provider or a renamed device shows in the launcher log."""
