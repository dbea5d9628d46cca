"""The training jobs of an environment: the sample benchmark and the fabric check, as MPIJobs.

The MPIJob kind exists only once the MPI Operator's CRD is installed. That is a real ordering
dependency, and the only one in the Kubernetes layer: pass the `MpiOperator` component in
`depends_on` (depending on a component waits for all of its children, the CRD included).
Without it, a first `pulumi up` on a fresh cluster can fail with "no matches for kind MPIJob".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.k8s.jobs.benchmark import BenchmarkJob, render_benchmark
from components.k8s.jobs.fabric_check import FabricCheckJob, render_fabric_check
from components.k8s.objects import check_dns_label, namespace, register_objects


@dataclass(frozen=True, kw_only=True)
class TrainingJobsArgs:
    provider: k8s.Provider
    """The cluster's explicit Kubernetes provider."""
    namespace: str = "training"
    """Namespace of the jobs; every enabled job must use it. Default `training`."""
    create_namespace: bool = True
    """Create the namespace (with Pod Security labels); default True. False when it exists."""
    benchmark: BenchmarkJob | None = None
    """The tf_cnn_benchmarks MPIJob; default None (not created)."""
    fabric_check: FabricCheckJob | None = None
    """The NCCL all_reduce_perf MPIJob; default None (not created)."""
    depends_on: Sequence[pulumi.Resource] = ()
    """What must exist before MPIJobs can be created: the MpiOperator component (its CRD).
    Default none, for clusters where the CRD is managed elsewhere."""

    def __post_init__(self) -> None:
        check_dns_label(self.namespace, "training namespace")
        jobs = self.jobs()
        for job in jobs:
            if job.namespace != self.namespace:
                raise ValueError(
                    f"job {job.job_name!r} is in namespace {job.namespace!r}, but TrainingJobs "
                    f"creates its jobs in {self.namespace!r}: set the job's namespace to match"
                )
        names = [job.job_name for job in jobs]
        if len(set(names)) != len(names):
            raise ValueError(f"training job names must differ, got {names}")

    def jobs(self) -> list[BenchmarkJob | FabricCheckJob]:
        return [job for job in (self.benchmark, self.fabric_check) if job is not None]

    def uses_rdma(self) -> bool:
        return any(job.shape.transport == "roce" for job in self.jobs())


def render_training_namespace(args: TrainingJobsArgs) -> dict[str, Any]:
    """The jobs' namespace: `baseline`, or `privileged` when a job adds `IPC_LOCK` for RDMA."""
    if args.uses_rdma():
        # Pod Security baseline allows only a short list of added capabilities, and IPC_LOCK is
        # not on it. Nothing else is relaxed: no privileged container, no host paths.
        return namespace(
            args.namespace,
            enforce="privileged",
            warn="baseline",
            audit="baseline",
            exception_reason=(
                "RDMA workers add capability IPC_LOCK to register memory with the PVRDMA "
                "device; containers are not privileged and mount no host paths"
            ),
        )
    return namespace(args.namespace, enforce="baseline")


class TrainingJobs(pulumi.ComponentResource):
    """Creates the enabled MPIJobs (and, by default, their namespace)."""

    job_names: list[str]
    """Names of the MPIJobs created (`kubectl -n <namespace> get mpijob <name>`)."""
    namespace: str

    def __init__(self, name: str, args: TrainingJobsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:TrainingJobs", name, None, opts)
        prerequisites: list[pulumi.Resource] = list(args.depends_on)
        if args.create_namespace:
            prerequisites.append(
                register_objects(
                    f"{name}-namespace",
                    [render_training_namespace(args)],
                    parent=self,
                    provider=args.provider,
                )
            )
        if args.benchmark is not None:
            register_objects(
                f"{name}-benchmark",
                [render_benchmark(args.benchmark)],
                parent=self,
                provider=args.provider,
                depends_on=prerequisites,
            )
        if args.fabric_check is not None:
            register_objects(
                f"{name}-fabric-check",
                [render_fabric_check(args.fabric_check)],
                parent=self,
                provider=args.provider,
                depends_on=prerequisites,
            )
        self.job_names = [job.job_name for job in args.jobs()]
        self.namespace = args.namespace
        self.register_outputs({"job_names": self.job_names, "namespace": self.namespace})
