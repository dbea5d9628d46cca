"""The training jobs a stack runs, as `verify` expects them, and the verdict on one job's launcher
log: the same judge for a live cluster (command.py) and a saved log (saved.py)."""

from __future__ import annotations

from dataclasses import dataclass

from components.k8s.jobs.benchmark import BenchmarkJob
from components.k8s.jobs.fabric_check import FabricCheckJob
from components.k8s.jobs.pytorch_ddp import PytorchDdpJob
from stacks.environment.model import Environment
from stacks.tools.verify.coverage import judge_coverage
from stacks.tools.verify.logs import Transport, Verdict, judge_benchmark, judge_fabric


@dataclass(frozen=True)
class ExpectedJob:
    name: str
    kind: str
    """fabric-check or benchmark."""
    transport: Transport
    gpus: int


def job_of_kind(env: Environment, kind: str) -> ExpectedJob:
    """The stack's fabric-check or benchmark MPIJob, named as the components name it (enabled or not)."""
    jobs = env.jobs
    workers = jobs.workers or len(env.gpu_workers.nodes)
    gpus = workers * jobs.sample.slots_per_worker
    if kind == "fabric-check":
        # Every GPU of every GPU worker, one rank each (stacks/wiring/kubernetes.py).
        every = len(env.gpu_workers.nodes) * len(env.gpu_workers.vgpu_profiles)
        return ExpectedJob(f"{FabricCheckJob.default_name}-{jobs.transport}", kind, jobs.transport, every)
    prefix = PytorchDdpJob.default_name if jobs.sample.benchmark == "pytorch-ddp" else BenchmarkJob.default_name
    return ExpectedJob(f"{prefix}-{jobs.transport}", "benchmark", jobs.transport, gpus)


def expected_jobs(env: Environment) -> list[ExpectedJob]:
    """The MPIJobs the stack creates."""
    found = []
    if env.jobs.fabric_check.enabled:
        found.append(job_of_kind(env, "fabric-check"))
    if env.jobs.sample.enabled:
        found.append(job_of_kind(env, "benchmark"))
    return found


def judge(env: Environment, job: ExpectedJob, log: str, *, gpus: int, succeeded: bool, verdict: Verdict) -> None:
    """The verdict on one job's launcher log: the same for a live cluster and a saved log."""
    if job.kind == "fabric-check":
        check = env.jobs.fabric_check
        judge_fabric(
            verdict,
            log,
            want=job.transport,
            link_gbps=check.link_gbps,
            min_share=check.min_bus_bandwidth_share,
            succeeded=succeeded,
        )
        # Against the stack, not the MPIJob's spec: a job that left workers out fails here.
        workers = len(env.gpu_workers.nodes)
        judge_coverage(
            verdict, log, want=job.transport, workers=workers, gpus=workers * len(env.gpu_workers.vgpu_profiles)
        )
    else:
        judge_benchmark(verdict, log, want=job.transport, gpus=gpus, succeeded=succeeded)
