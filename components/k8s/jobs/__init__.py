"""Distributed training jobs as Kubeflow MPIJobs: a typed MPIJob builder, the reference design's
tf_cnn_benchmarks job, an NCCL fabric check, and the component that registers them."""

from components.k8s.jobs.benchmark import BenchmarkJob, render_benchmark
from components.k8s.jobs.fabric_check import FabricCheckJob, render_fabric_check
from components.k8s.jobs.mpijob import (
    MpiJobSpec,
    ReplicaSpec,
    RunPolicy,
    mpirun_np,
    nccl_transport_env,
    render_mpijob,
)
from components.k8s.jobs.pods import WorkerShape
from components.k8s.jobs.training_jobs import TrainingJobs, TrainingJobsArgs

__all__ = [
    "BenchmarkJob",
    "FabricCheckJob",
    "MpiJobSpec",
    "ReplicaSpec",
    "RunPolicy",
    "TrainingJobs",
    "TrainingJobsArgs",
    "WorkerShape",
    "mpirun_np",
    "nccl_transport_env",
    "render_benchmark",
    "render_fabric_check",
    "render_mpijob",
]
