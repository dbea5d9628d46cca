"""Distributed training jobs as Kubeflow MPIJobs: a typed MPIJob builder, the current PyTorch DDP
benchmark, the reference design's tf_cnn_benchmarks job (legacy), an NCCL fabric check that judges
its own run, and the component that registers them."""

from components.k8s.jobs.benchmark import BenchmarkJob, render_benchmark
from components.k8s.jobs.fabric_check import FabricCheckJob, render_fabric_check, render_fabric_check_objects
from components.k8s.jobs.mpijob import (
    MpiJobSpec,
    ReplicaSpec,
    RunPolicy,
    mpirun_np,
    render_mpijob,
)
from components.k8s.jobs.pods import WorkerShape
from components.k8s.jobs.pytorch_ddp import PytorchDdpJob, render_pytorch_ddp, render_pytorch_ddp_objects
from components.k8s.jobs.training_jobs import TrainingJobs, TrainingJobsArgs
from components.k8s.jobs.transport import NcclTransport, nccl_transport_env

__all__ = [
    "BenchmarkJob",
    "FabricCheckJob",
    "MpiJobSpec",
    "NcclTransport",
    "PytorchDdpJob",
    "ReplicaSpec",
    "RunPolicy",
    "TrainingJobs",
    "TrainingJobsArgs",
    "WorkerShape",
    "mpirun_np",
    "nccl_transport_env",
    "render_benchmark",
    "render_fabric_check",
    "render_fabric_check_objects",
    "render_mpijob",
    "render_pytorch_ddp",
    "render_pytorch_ddp_objects",
]
