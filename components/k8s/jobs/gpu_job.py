"""What every MPIJob across the GPU workers shares: size, name, namespace, pod shape, image, env."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from components.k8s.jobs.mpijob import RestartPolicy, RunPolicy, mpirun_command, mpirun_np
from components.k8s.jobs.pods import WorkerShape
from components.k8s.jobs.transport import NcclTransport
from components.k8s.objects import check_dns_label, check_image

MpiMca = tuple[tuple[str, str], ...]

MPI_OVER_TCP: MpiMca = (("pml", "ob1"), ("btl", "^openib"))
"""Open MPI's own traffic (rank start-up, Horovod coordination) over TCP; NCCL carries the data."""

MPI_OVER_TCP_NO_HCOLL: MpiMca = (
    *MPI_OVER_TCP,
    # HPC-X's hcoll would try the HCA for MPI collectives; MPI only starts the ranks in these images.
    ("coll_hcoll_enable", "0"),
)


@dataclass(frozen=True, kw_only=True)
class GpuJob:
    """Base of the benchmark and the fabric check; subclasses set the image and what runs."""

    default_name: ClassVar[str]
    """Prefix of the default job name; the transport is appended."""
    description: ClassVar[str]
    """How error messages name the job."""
    mpi_mca: ClassVar[MpiMca]
    """Open MPI `--mca` settings of the launcher's mpirun."""
    launcher_restart_policy: ClassVar[RestartPolicy] = "OnFailure"
    """The launcher replica's `restartPolicy`. OnFailure (the operator's launcher default, named
    so the rendered job says it): a benchmark whose mpirun lost a worker runs again."""

    workers: int
    """Number of GPU worker pods; use all GPU workers (one per GPU VM in the reference). Required."""
    name: str | None = None
    """MPIJob name; default `<default_name>-<transport>`, so switching the transport replaces the
    finished job with a new one that runs (the operator never re-runs a finished MPIJob in place)."""
    namespace: str = "training"
    """Namespace of the job. Default `training`."""
    shape: WorkerShape = field(default_factory=WorkerShape)
    """Worker pods: GPUs (= slots) per worker, /dev/shm, transport; see `WorkerShape`."""
    image: str
    """Image of launcher and workers (Open MPI, sshd, NCCL and the workload)."""
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """More variables for every rank (e.g. `NCCL_IB_HCA`, `NCCL_SOCKET_IFNAME`,
    `NCCL_IB_GID_INDEX`); they override the transport's defaults. Default none."""
    nccl: NcclTransport | None = None
    """NCCL's transport settings; default `NcclTransport(transport=shape.transport)`, this
    cluster's values (transport.py). Its transport must match the shape's."""
    run_policy: RunPolicy = field(default_factory=RunPolicy)
    """Default: delete the workers when done, keep the launcher for its log."""

    @property
    def job_name(self) -> str:
        return self.name or f"{self.default_name}-{self.shape.transport}"

    def __post_init__(self) -> None:
        check_dns_label(self.job_name, f"{self.description} job name")
        check_image(self.image, f"{self.description} image")
        if self.workers < 1:
            raise ValueError(f"{self.description} needs at least one worker, got {self.workers}")
        if self.nccl is not None and self.nccl.transport != self.shape.transport:
            raise ValueError(
                f"{self.description}: nccl.transport {self.nccl.transport!r} differs from shape.transport "
                f"{self.shape.transport!r}; the pods and NCCL must agree"
            )

    @property
    def np(self) -> int:
        return mpirun_np(self.workers, self.shape.gpus)

    def env(self) -> dict[str, str]:
        """Variables every rank gets (exported by `mpirun -x` from the launcher)."""
        nccl = self.nccl or NcclTransport(transport=self.shape.transport)
        return {**nccl.env(), **self.extra_env}

    @property
    def gpus(self) -> int:
        """GPUs the job holds while it runs (every worker's, all at once)."""
        return self.workers * self.shape.gpus

    def launcher_command(self, program: list[str], *, per_worker: bool = False) -> list[str]:
        """mpirun across every slot (or, `per_worker`, one rank on each worker), exporting the
        transport's variables to each rank."""
        return mpirun_command(
            np=self.workers if per_worker else self.np,
            exported_env=[*self.env(), "LD_LIBRARY_PATH", "PATH"],
            mca=self.mpi_mca,
            program=program,
            map_by="ppr:1:node" if per_worker else "slot",
        )
