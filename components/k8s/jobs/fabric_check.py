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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from components.k8s.jobs.mpijob import (
    MpiJobSpec,
    ReplicaSpec,
    RunPolicy,
    mpirun_command,
    mpirun_np,
    nccl_transport_env,
    render_mpijob,
)
from components.k8s.jobs.pods import WorkerShape, launcher_template, worker_template
from components.k8s.objects import app_labels, check_dns_label, check_image

NCCL_TESTS_IMAGE = "ghcr.io/coreweave/nccl-tests:12.4.1-cudnn-devel-ubuntu20.04-nccl2.21.5-1-85f9143"
ALL_REDUCE_PERF = "/opt/nccl_tests/build/all_reduce_perf"
MPI_MCA: tuple[tuple[str, str], ...] = (
    ("pml", "ob1"),
    ("btl", "^openib"),
    # HPC-X's hcoll would try the HCA for MPI collectives; NCCL is what we measure.
    ("coll_hcoll_enable", "0"),
)


@dataclass(frozen=True, kw_only=True)
class FabricCheckJob:
    """NCCL all-reduce bandwidth across all GPU workers."""

    workers: int
    """Number of GPU worker pods; use all GPU workers. Required."""
    name: str | None = None
    """MPIJob name; default `nccl-fabric-check-<transport>`, so switching the transport replaces the finished
    job with a new one that runs (the operator never re-runs a finished MPIJob in place)."""
    namespace: str = "training"
    """Namespace of the job. Default `training`."""
    shape: WorkerShape = field(default_factory=WorkerShape)
    """Worker pods: GPUs (= slots) per worker, /dev/shm, transport; see `WorkerShape`."""
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
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """More variables for every rank (override the transport's defaults). Default none."""
    run_policy: RunPolicy = field(default_factory=RunPolicy)
    """Default: delete the workers when done, keep the launcher for its log."""

    @property
    def job_name(self) -> str:
        return self.name or f"nccl-fabric-check-{self.shape.transport}"

    def __post_init__(self) -> None:
        check_dns_label(self.job_name, "fabric check job name")
        check_image(self.image, "fabric check image")
        if self.workers < 1:
            raise ValueError(f"fabric check needs at least one worker, got {self.workers}")
        if self.step_factor < 2:
            raise ValueError("step_factor must be at least 2")

    @property
    def np(self) -> int:
        return mpirun_np(self.workers, self.shape.gpus)

    def env(self) -> dict[str, str]:
        return {**nccl_transport_env(self.shape.transport), **self.extra_env}

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
    command = mpirun_command(
        np=job.np,
        exported_env=[*env, "LD_LIBRARY_PATH", "PATH"],
        mca=MPI_MCA,
        program=job.test_args(),
    )
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
