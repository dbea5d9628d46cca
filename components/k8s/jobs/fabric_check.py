"""Fabric validation: NCCL's `all_reduce_perf` across all GPU workers.

`all_reduce_perf -b 8 -e 4G -f 2 -g 1` sweeps message sizes from 8 B to 4 GiB (doubling), one GPU
per rank, one rank per GPU across every worker, over the same RoCE/TCP switch as the training job.
Every GPU worker runs one worker pod holding all of its GPUs (`shape.gpus` = the worker's vGPUs,
stacks/wiring/kubernetes.py), and the MPIJob's `slotsPerWorker` equals it: the MPI Operator writes
`<pod>.<job>.<namespace>.svc slots=<slotsPerWorker>` per worker into the launcher's hostfile
(kubeflow/mpi-operator pkg/controller/mpi_job_controller.go `newConfigMap`), and `mpirun -np
<workers x slots> -map-by slot` fills them, so each rank has its own GPU and each worker's RDMA
device carries traffic. A pod that holds all of its node's GPUs cannot share the node with
another, so the scheduler itself spreads the pods one per worker; `plan` refuses a check that
would leave a GPU worker or a GPU out (stacks/tools/plan/admission/coverage.py); the launcher's
verdict (given the workers and ranks) and `verify` (stacks/tools/verify/coverage.py) FAIL a log in
which a worker, a rank or a worker's RDMA device is missing.
The launcher then judges the run (files/fabric_verdict.sh, shipped in a ConfigMap): the job FAILS
when NCCL used another network than asked for (a RoCE run that fell back to `NET/Socket`), when
over RoCE the peak bus bandwidth is below `min_bus_share` of the link rate, or when values were
wrong. A fallback can no longer pass as a success. The launcher runs once: its replica's
`restartPolicy` is Never and `runPolicy.backoffLimit` 0, so a failed verdict fails the MPIJob
instead of re-running the sweep (the operator's launcher default, OnFailure, restarted the
container and the batch Job's default backoff of 6 made new pods, each a new sweep).

There is no nccl-tests image from NVIDIA on a public registry. The default is CoreWeave's public,
tag-pinned build (`ghcr.io/coreweave/nccl-tests`, listed in its README: CUDA 12.4.1 / NCCL 2.27.6 /
HPC-X 2.23, with openssh-server; binaries in /opt/nccl-tests/build). NCCL 2.26+ fixed
`ibv_query_gid` failures in containers. CUDA 12.4 needs a guest driver of branch R550 or newer
(vGPU 17+). Its HPC-X IB plugin is first on the library path; transport.py keeps it off. To use
another image, set `image` and `binary`; it needs Open MPI, sshd, a POSIX shell with awk, and
nccl-tests built with MPI=1.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, ClassVar

from components.k8s.jobs.gpu_job import MPI_OVER_TCP_NO_HCOLL, GpuJob, MpiMca
from components.k8s.jobs.mpijob import (
    MpiJobSpec,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
    render_mpijob,
)
from components.k8s.jobs.pods import launcher_template, worker_template
from components.k8s.jobs.script_files import SCRIPTS_DIR, scripts_configmap, scripts_mount, scripts_volume
from components.k8s.jobs.verbs import CHECK_AND_LIST_VERBS_DEVICES
from components.k8s.objects import app_labels

NCCL_TESTS_IMAGE = "ghcr.io/coreweave/nccl-tests:12.4.1-devel-ubuntu22.04-nccl2.27.6-1-7c12c62"
ALL_REDUCE_PERF = "/opt/nccl-tests/build/all_reduce_perf"
VERDICT_SCRIPT = "fabric_verdict.sh"
RUN_LOG = "/tmp/all_reduce_perf.log"


@dataclass(frozen=True, kw_only=True)
class FabricCheckJob(GpuJob):
    """NCCL all-reduce bandwidth across all GPU workers."""

    default_name: ClassVar[str] = "nccl-fabric-check"
    description: ClassVar[str] = "fabric check"
    mpi_mca: ClassVar[MpiMca] = MPI_OVER_TCP_NO_HCOLL
    launcher_restart_policy: ClassVar[RestartPolicy] = "Never"

    run_policy: RunPolicy = field(default_factory=lambda: RunPolicy(backoff_limit=0))
    """Default: delete the workers when done, keep the launcher for its log, no retry. Its
    `backoff_limit` must be 0: a retry would run the sweep again and report the last run."""

    image: str = NCCL_TESTS_IMAGE
    """Image with Open MPI, sshd and nccl-tests. Default CoreWeave's pinned nccl-tests build, whose
    MOFED rdma-core lacks the vmw_pvrdma provider: over RoCE use the site image
    (images/site/Dockerfile), or the check stops before its sweep saying so."""
    binary: str = ALL_REDUCE_PERF
    """Path of all_reduce_perf in the image. Default /opt/nccl_tests/build/all_reduce_perf."""
    min_bytes: str = "8"
    """`-b`: smallest message. Default 8 (bytes)."""
    max_bytes: str = "4G"
    """`-e`: largest message. Default 4G."""
    step_factor: int = 2
    """`-f`: size multiplier between steps. Default 2."""
    link_gbps: float = 100.0
    """Line rate of the RDMA uplinks in Gb/s; bus bandwidth is judged against it. Default 100
    (12.5 GB/s)."""
    min_bus_share: float = 0.8
    """Over RoCE, the least peak bus bandwidth as a share of the link rate. Default 0.8: a good
    bare-metal all_reduce reaches about 0.97; PVRDMA costs a few per cent. Not applied over TCP,
    whose figure is the comparison."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.step_factor < 2:
            raise ValueError("step_factor must be at least 2")
        if self.link_gbps <= 0:
            raise ValueError(f"link_gbps must be positive, got {self.link_gbps}")
        if self.run_policy.backoff_limit != 0:
            raise ValueError(
                f"fabric check: run_policy.backoff_limit must be 0, got {self.run_policy.backoff_limit}: "
                "a retried launcher runs the sweep again and hides a failed verdict; pass RunPolicy(backoff_limit=0, ...)"
            )
        if not 0 <= self.min_bus_share <= 1:
            raise ValueError(f"min_bus_share is a share of the link rate between 0 and 1, got {self.min_bus_share}")

    @property
    def scripts_configmap_name(self) -> str:
        return f"{self.job_name}-verdict"

    def checked_command(self) -> list[str]:
        """Over RoCE each worker's verbs provider and devices first: a worker whose image lacks
        the vmw_pvrdma provider stops the check there (exit 3), before the sweep, naming the
        image as the cause (verbs.py). Then mpirun, its output kept in a log, then the verdict on
        that log: the launcher's exit status is the verdict's (or mpirun's, when the test itself
        failed)."""
        devices = ""
        if self.shape.transport == "roce":
            listing = shlex.join(
                self.launcher_command(["/bin/sh", "-c", CHECK_AND_LIST_VERBS_DEVICES], per_worker=True)
            )
            devices = (
                f"{listing} || {{ echo 'fabric check: stopped before the sweep: a worker cannot drive the "
                "PVRDMA device (see above)' >&2; exit 3; } ; "
            )
        run = shlex.join(self.launcher_command(self.test_args()))
        verdict = shlex.join(
            [
                "/bin/sh",
                f"{SCRIPTS_DIR}/{VERDICT_SCRIPT}",
                self.shape.transport,
                f"{self.link_gbps:g}",
                f"{self.min_bus_share:g}",
                RUN_LOG,
                str(self.workers),  # every worker and rank must show in the log (the verdict's coverage)
                str(self.np),
            ]
        )
        return ["/bin/bash", "-o", "pipefail", "-c", f"{devices}{run} 2>&1 | tee {RUN_LOG} && exec {verdict}"]

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
    command = job.checked_command()
    spec = MpiJobSpec(
        name=job.job_name,
        namespace=job.namespace,
        slots_per_worker=job.shape.gpus,
        run_policy=job.run_policy,
        labels=labels,
        launcher=ReplicaSpec(
            restart_policy=job.launcher_restart_policy,
            template=launcher_template(
                image=job.image,
                command=command,
                env=env,
                labels=labels,
                extra_volumes=[scripts_volume(job.scripts_configmap_name)],
                extra_mounts=[scripts_mount()],
            ),
        ),
        worker=ReplicaSpec(
            replicas=job.workers,
            template=worker_template(
                image=job.image,
                shape=job.shape,
                labels=labels,
                env={},
            ),
        ),
    )
    return render_mpijob(spec)


def render_fabric_check_objects(job: FabricCheckJob) -> list[dict[str, Any]]:
    """The ConfigMap holding the verdict script, then the MPIJob that mounts it."""
    labels = app_labels(job.job_name, "fabric-check")
    configmap = scripts_configmap(
        name=job.scripts_configmap_name, namespace=job.namespace, labels=labels, files=[VERDICT_SCRIPT]
    )
    return [configmap, render_fabric_check(job)]
