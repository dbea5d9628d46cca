"""The component that creates the tuning sample: its namespace, runtime and Experiment/TrainJob.

The namespace carries Katib's metrics-collector label (the collector is injected only there) and
the Pod Security exception the GPU workers need (IPC_LOCK over RoCE, host network over TCP), like
the training jobs' namespace. Everything waits on the `KubeflowTuning` component: the
TrainingRuntime, TrainJob and Experiment kinds exist once its CRDs do, and Katib's webhook must
answer before an Experiment is accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.k8s.jobs.pod_policy import JobPodExceptions, policy_name, render_job_pod_policy
from components.k8s.jobs.trainjob import METRICS_INJECTION_LABEL, TuningSampleJob, render_tuning_objects
from components.k8s.objects import namespace, register_objects


def render_tuning_namespace(job: TuningSampleJob) -> dict[str, Any]:
    labels = {METRICS_INJECTION_LABEL: "enabled"} if job.katib else {}
    reasons = []
    if job.shape.transport == "roce":
        reasons.append("RDMA trial pods add capability IPC_LOCK to register memory with the PVRDMA device")
    if job.shape.host_network:
        reasons.append("TCP trial pods use the host network so NCCL's sockets cross the PVRDMA NIC")
    if not reasons:
        return namespace(job.namespace, enforce="baseline", labels=labels)
    return namespace(
        job.namespace,
        enforce="privileged",
        warn="baseline",
        audit="baseline",
        exception_reason="; ".join(reasons)
        + f"; the ValidatingAdmissionPolicy {policy_name(job.namespace)} refuses everything else beyond baseline",
        labels=labels,
    )


def render_tuning_pod_policy(job: TuningSampleJob) -> list[dict[str, Any]]:
    """The trial pods' namespace gets the jobs' pod policy (pod_policy.py) when they need more
    than baseline: `IPC_LOCK` over RoCE, the host network over TCP, nothing else."""
    exceptions = JobPodExceptions(ipc_lock=job.shape.transport == "roce", host_network=job.shape.host_network)
    return render_job_pod_policy(job.namespace, exceptions) if exceptions.any else []


@dataclass(frozen=True, kw_only=True)
class TuningSampleArgs:
    provider: k8s.Provider
    """The cluster's explicit Kubernetes provider."""
    job: TuningSampleJob
    """What to create."""
    depends_on: Sequence[pulumi.Resource] = ()
    """The KubeflowTuning component (its CRDs and webhooks). Default none, for clusters where
    Trainer and Katib are installed elsewhere."""


class TuningSample(pulumi.ComponentResource):
    """The tuning sample (an Experiment whose trials are TrainJobs, or one TrainJob)."""

    namespace: str
    kind: str
    """`Experiment` or `TrainJob`."""

    def __init__(self, name: str, args: TuningSampleArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:TuningSample", name, None, opts)
        ns = register_objects(
            f"{name}-namespace", [render_tuning_namespace(args.job)], parent=self, provider=args.provider
        )
        guard = render_tuning_pod_policy(args.job)
        prerequisites = [ns]
        if guard:
            prerequisites.append(
                register_objects(f"{name}-pod-guard", guard, parent=self, provider=args.provider, depends_on=[ns])
            )
        register_objects(
            f"{name}-objects",
            render_tuning_objects(args.job),
            parent=self,
            provider=args.provider,
            depends_on=[*prerequisites, *args.depends_on],
        )
        self.namespace = args.job.namespace
        self.kind = "Experiment" if args.job.katib else "TrainJob"
        self.register_outputs({"namespace": self.namespace, "kind": self.kind})
