"""The `mpiOperator` and `jobs` settings: the MPI Operator release, the sample benchmark and the
NCCL fabric check (split from model.py; `stacks.environment.model` still exports them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stacks.environment.base import Model
from stacks.environment.fields import DnsLabel, EnvName, NonEmpty, PinnedImage, Quantity


class MpiOperatorSettings(Model):
    version: Literal["0.8.2", "0.8.0"] = "0.8.2"
    """The release whose kubeflow.org/v2beta1 manifest is installed; 0.8.2 (July 2026) and 0.8.0
    share the CRD schema the tests check against."""
    placement: Literal["control-plane", "any-node"] = "control-plane"
    """Where the controller runs. control-plane: on kubeadm's control-plane nodes (selects their
    label, tolerates their taint); any-node: any node whose taints it tolerates (use it for an
    existing cluster whose control plane is not schedulable or not visible)."""
    crd_url: str | None = None
    """Where the provider fetches the MPIJob CRD from; default the release's file on GitHub
    (set a mirror when the deploying machine cannot reach GitHub)."""


class SampleJob(Model):
    enabled: bool = False
    """Run the benchmark. Default false: it wants the same GPUs as the fabric check, which runs
    first; switch this on (and the check off) once the check has passed."""
    benchmark: Literal["pytorch-ddp", "tf-cnn-benchmarks"] = "pytorch-ddp"
    """Which benchmark runs: pytorch-ddp (PyTorch DDP ResNet-50 on synthetic data from NVIDIA's
    PyTorch image) or tf-cnn-benchmarks (the reference design's Horovod job; legacy: Horovod and
    tf_cnn_benchmarks are no longer maintained)."""
    image: PinnedImage | None = None
    """Image of launcher and workers; default per benchmark: nvcr.io/nvidia/pytorch:25.06-py3 or
    horovod/horovod:0.28.1."""
    model: NonEmpty = "resnet50"
    """tf_cnn_benchmarks `--model` (tf-cnn-benchmarks only; pytorch-ddp always runs ResNet-50)."""
    batch_size: int = Field(default=32, ge=1)
    """Images per GPU per step (the reference design's 32)."""
    num_batches: int = Field(default=100, ge=1)
    """Timed steps."""
    slots_per_worker: int = Field(default=1, ge=1)
    """MPI ranks per worker; one per vGPU (cannot exceed `gpuWorkers.vgpuProfiles`)."""
    shm_size: Quantity = "8Gi"
    """Size of the memory-backed /dev/shm of each worker (Docker's 64 MB default is too small for NCCL)."""
    script_path: str | None = None
    """tf-cnn-benchmarks only: path of tf_cnn_benchmarks.py inside `image`. Set, the workers do not
    clone the script from GitHub (for images with it baked in, or sites without egress)."""


class FabricCheck(Model):
    enabled: bool = True
    """Create the NCCL all_reduce_perf MPIJob that shows whether RDMA is used; default true."""
    image: PinnedImage | None = None
    """Image with nccl-tests; default: the pinned image the job builder documents."""
    link_gbps: float = Field(default=100, gt=0)
    """Line rate of the RDMA uplinks in Gb/s (100 GbE = 12.5 GB/s); bus bandwidth is judged against it."""
    min_bus_bandwidth_share: float = Field(default=0.8, ge=0, le=1)
    """Over RoCE the check fails below this share of the link rate (peak all_reduce bus
    bandwidth). A good bare-metal all_reduce reaches about 0.97; PVRDMA costs a few per cent."""


class Jobs(Model):
    transport: Literal["roce", "tcp"] = "roce"
    """How NCCL talks between workers in every job: roce over the PVRDMA device, tcp over the
    PVRDMA NIC's own interface (host network), so both cross the same link."""
    namespace: DnsLabel = "training"
    """Namespace the jobs run in (created by the program); default training."""
    workers: int | None = Field(default=None, ge=1)
    """Worker pods of the sample benchmark; default every GPU worker (set 1 for a single-node
    baseline). The fabric check runs on every GPU worker with all its GPUs, and `plan` refuses it
    with fewer: switch it off for a smaller run."""
    extra_env: dict[EnvName, str] = Field(default_factory=dict)
    """More environment variables for every rank of every job; they override the transport's
    settings (e.g. `NCCL_IB_GID_INDEX: "3"`, `NCCL_DEBUG: WARN`)."""
    site_image: PinnedImage | None = None
    """The site's job image, built from `images/site/Dockerfile` (NVIDIA's PyTorch image plus
    sshd, the distribution's verbs providers incl. vmw_pvrdma, and nccl-tests): the fabric check
    and the PyTorch samples run on it unless their own `image` is set. Jobs install nothing at
    start, so without it the PyTorch sample has no sshd and, over RoCE, the fabric check's default
    image has no vmw_pvrdma provider (the check then says so before it sweeps). Default none."""
    sample: SampleJob = SampleJob()
    """The tf_cnn_benchmarks job."""
    fabric_check: FabricCheck = FabricCheck()
    """The NCCL fabric check job."""
