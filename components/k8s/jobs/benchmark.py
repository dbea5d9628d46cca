"""The reference design's sample job (legacy): tf_cnn_benchmarks ResNet-50 with Horovod over MPI.

As in the reference (RDG, NVIDIA/Mellanox): ResNet-50, batch 32 per GPU, `--use_fp16`,
`--xla=True`, `--variable_update=horovod`, one rank per GPU, `HOROVOD_MPI_THREADS_DISABLE` 1 over
RoCE and 0 over TCP. NCCL's transport is set explicitly (transport.py) rather than with the
reference's `NCCL_IB_DISABLE`/`NCCL_IB_GDR_LEVEL` alone (NCCL never read the latter). Unlike the
reference, workers get the RDMA device from the RDMA device plugin instead of a privileged
container with /dev/infiniband mounted. Horovod's last release is from 2023 and tf_cnn_benchmarks
is archived: the current sample is pytorch_ddp.py; this one stays for comparison with the
reference design's figures. Its image's NCCL (2.9.9) predates `NCCL_NET`, so a fallback to sockets
is caught by the verdict (`python -m stacks verify`), not prevented.

The Horovod image (`horovod/horovod:0.28.1`: TensorFlow, Open MPI, NCCL, sshd) does not contain
tf_cnn_benchmarks, and jobs fetch nothing at start: run it on an image that carries the scripts
(branch `cnn_tf_v2.1_compatible` of the archived tensorflow/benchmarks repository, the line that
runs on TensorFlow 2; docs/air-gapped.md shows the three-line Dockerfile) and set `script_path`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from components.k8s.jobs.gpu_job import MPI_OVER_TCP, GpuJob, MpiMca
from components.k8s.jobs.mpijob import (
    MpiJobSpec,
    ReplicaSpec,
    render_mpijob,
)
from components.k8s.jobs.pods import launcher_template, worker_template
from components.k8s.objects import app_labels

HOROVOD_IMAGE = "horovod/horovod:0.28.1"
SCRIPT = "/benchmarks/scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py"
"""Where docs/air-gapped.md's image puts the script."""


@dataclass(frozen=True, kw_only=True)
class BenchmarkJob(GpuJob):
    """tf_cnn_benchmarks across all GPU workers."""

    default_name: ClassVar[str] = "tf-cnn-benchmarks"
    description: ClassVar[str] = "benchmark"
    mpi_mca: ClassVar[MpiMca] = MPI_OVER_TCP

    image: str = HOROVOD_IMAGE
    """Image of launcher and workers; needs Open MPI, Horovod with TensorFlow, NCCL, sshd and the
    tf_cnn_benchmarks scripts at `script_path`. Default `horovod/horovod:0.28.1` (no scripts)."""
    model: str = "resnet50"
    """tf_cnn_benchmarks `--model`. Default resnet50."""
    batch_size: int = 32
    """Batch size per GPU. Default 32."""
    num_batches: int = 100
    """Timed steps (`--num_batches`). Default 100."""
    use_fp16: bool = True
    """Mixed precision (`--use_fp16`). Default True."""
    xla: bool = True
    """XLA JIT (`--xla=True`). Default True."""
    script_path: str = SCRIPT
    """Path of tf_cnn_benchmarks.py inside the image. Default where docs/air-gapped.md's image puts it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size < 1 or self.num_batches < 1:
            raise ValueError("batch_size and num_batches must be positive")

    def benchmark_args(self) -> list[str]:
        args = [
            "python",
            self.script_path,
            f"--model={self.model}",
            f"--batch_size={self.batch_size}",
            f"--num_batches={self.num_batches}",
            "--num_gpus=1",
            "--variable_update=horovod",
        ]
        if self.use_fp16:
            args.append("--use_fp16")
        if self.xla:
            args.append("--xla=True")
        return args


def render_benchmark(job: BenchmarkJob) -> dict[str, Any]:
    """The benchmark's MPIJob."""
    labels = app_labels(job.job_name, "training-benchmark")
    env = job.env()
    command = job.launcher_command(job.benchmark_args())
    spec = MpiJobSpec(
        name=job.job_name,
        namespace=job.namespace,
        slots_per_worker=job.shape.gpus,
        run_policy=job.run_policy,
        labels=labels,
        launcher=ReplicaSpec(
            restart_policy=job.launcher_restart_policy,
            template=launcher_template(image=job.image, command=command, env=env, labels=labels),
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
