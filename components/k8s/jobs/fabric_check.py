"""Fabric validation: NCCL's `all_reduce_perf` across all GPU workers.

`all_reduce_perf -b 8 -e 4G -f 2 -g 1` sweeps message sizes from 8 B to 4 GiB (doubling), one GPU
per rank, one rank per GPU across every worker, over the same RoCE/TCP switch as the training job.
With `NCCL_DEBUG=INFO` the launcher log says which transport NCCL chose (`NET/IB` over the PVRDMA
device, `NET/Socket` on the TCP fallback); the `busbw` column is read against the link speed (see
docs/training-jobs.md).

There is no nccl-tests image from NVIDIA on a public registry. The default is CoreWeave's public,
tag-pinned build (`ghcr.io/coreweave/nccl-tests`, CUDA 12.4.1 / NCCL 2.21.5 / HPC-X Open MPI, with
openssh-server; binaries in /opt/nccl_tests/build), widely used with the MPI Operator. CUDA 12.4
needs a guest driver of branch R550 or newer (vGPU 17+). To use another image, set `image` and
`binary`; it needs Open MPI, sshd and nccl-tests built with MPI=1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from components.k8s.jobs.gpu_job import GpuJob
from components.k8s.jobs.mpijob import (
    MpiJobSpec,
    ReplicaSpec,
    render_mpijob,
)
from components.k8s.jobs.pods import launcher_template, worker_template
from components.k8s.objects import app_labels

NCCL_TESTS_IMAGE = "ghcr.io/coreweave/nccl-tests:12.4.1-cudnn-devel-ubuntu20.04-nccl2.21.5-1-85f9143"
ALL_REDUCE_PERF = "/opt/nccl_tests/build/all_reduce_perf"
MPI_MCA: tuple[tuple[str, str], ...] = (
    ("pml", "ob1"),
    ("btl", "^openib"),
    # HPC-X's hcoll would try the HCA for MPI collectives; NCCL is what we measure.
    ("coll_hcoll_enable", "0"),
)


@dataclass(frozen=True, kw_only=True)
class FabricCheckJob(GpuJob):
    """NCCL all-reduce bandwidth across all GPU workers."""

    default_name: ClassVar[str] = "nccl-fabric-check"
    description: ClassVar[str] = "fabric check"
    mpi_mca: ClassVar[tuple[tuple[str, str], ...]] = MPI_MCA

    image: str = NCCL_TESTS_IMAGE
    """Image with Open MPI, sshd and nccl-tests. Default CoreWeave's pinned nccl-tests build."""
    binary: str = ALL_REDUCE_PERF
    """Path of all_reduce_perf in the image. Default /opt/nccl_tests/build/all_reduce_perf."""
    min_bytes: str = "8"
    """`-b`: smallest message. Default 8 (bytes)."""
    max_bytes: str = "4G"
    """`-e`: largest message. Default 4G."""
    step_factor: int = 2
    """`-f`: size multiplier between steps. Default 2."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.step_factor < 2:
            raise ValueError("step_factor must be at least 2")

    def test_args(self) -> list[str]:
        # -g 1: one GPU per rank; ranks = GPUs, placed by the hostfile's slots.
        return [
            self.binary,
            "-b",
            self.min_bytes,
            "-e",
            self.max_bytes,
            "-f",
            str(self.step_factor),
            "-g",
            "1",
        ]


def render_fabric_check(job: FabricCheckJob) -> dict[str, Any]:
    """The fabric check's MPIJob."""
    labels = app_labels(job.job_name, "fabric-check")
    env = job.env()
    command = job.launcher_command(job.test_args())
    spec = MpiJobSpec(
        name=job.job_name,
        namespace=job.namespace,
        slots_per_worker=job.shape.gpus,
        run_policy=job.run_policy,
        labels=labels,
        launcher=ReplicaSpec(template=launcher_template(image=job.image, command=command, env=env, labels=labels)),
        worker=ReplicaSpec(
            replicas=job.workers,
            template=worker_template(image=job.image, shape=job.shape, labels=labels, env={}),
        ),
    )
    return render_mpijob(spec)
