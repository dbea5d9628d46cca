"""The training jobs of an environment: the sample benchmark and the fabric check, as MPIJobs.

Jobs that run at the same time must fit in the GPUs together: each MPIJob's workers hold their
GPUs from scheduling until the job ends, and the launcher starts only when every worker is Ready
(`WaitForWorkersReady`). Two jobs that each want every GPU can each get some and wait forever;
without gang scheduling nothing breaks that tie. So `gpus_available` refuses such a set (the
stack's rule `jobs` in stacks/environment/rules/__init__.py says the same with the key to change); run the fabric
check first and the benchmark after it (docs/training-jobs.md).

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
from components.k8s.jobs.fabric_check import FabricCheckJob, render_fabric_check_objects
from components.k8s.jobs.pod_policy import JobPodExceptions, policy_name, render_job_pod_policy
from components.k8s.jobs.pytorch_ddp import PytorchDdpJob, render_pytorch_ddp_objects
from components.k8s.objects import check_dns_label, namespace, register_objects


@dataclass(frozen=True, kw_only=True)
class TrainingJobsArgs:
    provider: k8s.Provider
    """The cluster's explicit Kubernetes provider."""
    namespace: str = "training"
    """Namespace of the jobs; every enabled job must use it. Default `training`."""
    create_namespace: bool = True
    """Create the namespace (with Pod Security labels); default True. False when it exists."""
    benchmark: BenchmarkJob | PytorchDdpJob | None = None
    """The sample benchmark: PyTorch DDP (current) or tf_cnn_benchmarks (legacy); default None
    (not created)."""
    fabric_check: FabricCheckJob | None = None
    """The NCCL all_reduce_perf MPIJob; default None (not created)."""
    gpus_available: int | None = None
    """GPUs the cluster's workers have; the enabled jobs must fit in them together (see the
    module docstring). Default None: not checked."""
    node_networks: Sequence[str] = ()
    """The nodes' networks (management and RDMA subnets, CIDRs). With host-network (TCP) workers,
    the jobs' pods accept connections from them too: Open MPI's daemons on the workers connect
    back to `mpirun` in the launcher pod from node addresses. Default none."""
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
        wanted = sum(job.gpus for job in jobs)
        if self.gpus_available is not None and wanted > self.gpus_available:
            raise ValueError(
                f"the enabled jobs need {wanted} GPUs at once ("
                + ", ".join(f"{job.job_name}: {job.gpus}" for job in jobs)
                + f") but the workers have {self.gpus_available}: without gang scheduling they can "
                "deadlock; enable one at a time or give each fewer workers"
            )

    def jobs(self) -> list[BenchmarkJob | PytorchDdpJob | FabricCheckJob]:
        return [job for job in (self.benchmark, self.fabric_check) if job is not None]

    def exceptions(self) -> list[str]:
        """Why the jobs' pods need more than Pod Security `baseline`."""
        reasons = []
        if any(job.shape.transport == "roce" for job in self.jobs()):
            reasons.append("RDMA workers add capability IPC_LOCK to register memory with the PVRDMA device")
        if any(job.shape.host_network for job in self.jobs()):
            reasons.append("TCP workers use the host network so NCCL's sockets cross the PVRDMA NIC")
        return reasons


def job_pod_exceptions(args: TrainingJobsArgs) -> JobPodExceptions:
    """What the enabled jobs' pods need beyond Pod Security `baseline`, and nothing more."""
    return JobPodExceptions(
        ipc_lock=any(job.shape.transport == "roce" for job in args.jobs()),
        host_network=any(job.shape.host_network for job in args.jobs()),
    )


def render_training_namespace(args: TrainingJobsArgs) -> dict[str, Any]:
    """The jobs' namespace: `baseline`, or `privileged` when a job adds `IPC_LOCK` (RoCE) or uses
    the host network (TCP): both are outside `baseline`, and Pod Security cannot admit one
    capability alone. The ValidatingAdmissionPolicy of `render_training_guard` then refuses
    everything beyond baseline and those two (`pod_policy.py`)."""
    reasons = args.exceptions()
    if reasons:
        return namespace(
            args.namespace,
            enforce="privileged",
            warn="baseline",
            audit="baseline",
            exception_reason="; ".join(reasons)
            + f"; the ValidatingAdmissionPolicy {policy_name(args.namespace)} refuses everything else beyond baseline",
        )
    return namespace(args.namespace, enforce="baseline")


def render_training_network_policy(namespace_name: str, host_sources: Sequence[str] = ()) -> dict[str, Any]:
    """The jobs' pods accept connections only from pods of their own namespace: the launcher's ssh
    to the workers and NCCL's bootstrap and socket traffic (ephemeral ports, so not narrowed to
    ports) stay inside it; pods of other namespaces cannot reach the workers' sshd. Egress stays
    open: jobs may fetch packages or data. RDMA traffic does not pass the kernel's network stack.

    `host_sources` (the node networks) when workers run on the host network (TCP): Kubernetes
    treats a host-network pod's traffic as its node's (kubernetes.io/docs/concepts/services-
    networking/network-policies, "hostNetwork pods"), so a podSelector never matches it, and Open
    MPI's daemons on those workers connect back to `mpirun` in the launcher pod (an ephemeral port)
    from node addresses. The workers' own ports are the nodes' firewall's (docs/security.md)."""
    sources: list[dict[str, Any]] = [{"podSelector": {}}]
    sources += [{"ipBlock": {"cidr": cidr}} for cidr in host_sources]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "job-pods-only-from-this-namespace", "namespace": namespace_name},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": sources}],
        },
    }


def render_training_guard(args: TrainingJobsArgs) -> list[dict[str, Any]]:
    """What guards the jobs' namespace besides its labels: the pod policy when its pods need more
    than baseline, and the network policy."""
    objects: list[dict[str, Any]] = []
    exceptions = job_pod_exceptions(args)
    if exceptions.any:
        objects.extend(render_job_pod_policy(args.namespace, exceptions))
    host_sources = args.node_networks if exceptions.host_network else ()
    objects.append(render_training_network_policy(args.namespace, host_sources))
    return objects


def render_benchmark_objects(job: BenchmarkJob | PytorchDdpJob) -> list[dict[str, Any]]:
    if isinstance(job, PytorchDdpJob):
        return render_pytorch_ddp_objects(job)
    return [render_benchmark(job)]


class TrainingJobs(pulumi.ComponentResource):
    """Creates the enabled MPIJobs (and, by default, their namespace)."""

    job_names: list[str]
    """Names of the MPIJobs created (`kubectl -n <namespace> get mpijob <name>`)."""
    namespace: str

    def __init__(self, name: str, args: TrainingJobsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:TrainingJobs", name, None, opts)
        prerequisites: list[pulumi.Resource] = list(args.depends_on)
        if args.create_namespace:
            created = register_objects(
                f"{name}-namespace",
                [render_training_namespace(args)],
                parent=self,
                provider=args.provider,
            )
            prerequisites.append(created)
            # Before any job: its pods are judged by the policy from the first one on.
            prerequisites.append(
                register_objects(
                    f"{name}-pod-guard",
                    render_training_guard(args),
                    parent=self,
                    provider=args.provider,
                    depends_on=[created],
                )
            )
        if args.benchmark is not None:
            register_objects(
                f"{name}-benchmark",
                render_benchmark_objects(args.benchmark),
                parent=self,
                provider=args.provider,
                depends_on=prerequisites,
            )
        if args.fabric_check is not None:
            register_objects(
                f"{name}-fabric-check",
                render_fabric_check_objects(args.fabric_check),
                parent=self,
                provider=args.provider,
                depends_on=prerequisites,
            )
        self.job_names = [job.job_name for job in args.jobs()]
        self.namespace = args.namespace
        self.register_outputs({"job_names": self.job_names, "namespace": self.namespace})
