"""The current sample benchmark: PyTorch DDP ResNet-50 on synthetic data, one rank per GPU.

Launched like the legacy Horovod job (MPIJob, the launcher's `mpirun` starts one process per GPU
over ssh), from NVIDIA's pinned PyTorch framework image. The script (files/ddp_resnet50.py) comes
from a ConfigMap mounted on the workers, so nothing is fetched from GitHub; it prints
`total images/sec:` and `images/sec per GPU:`, which the verdict reads.

`nvcr.io/nvidia/pytorch:25.06-py3` is on the CUDA 12.9 line (guest driver R575, or R535/R550/R570
with CUDA forward compatibility on data-center GPUs: check NVIDIA's release notes for the tag
against the vGPU release in use). The image ships Open MPI (HPC-X) and the ssh client but no sshd,
and workers install nothing at start: run it on the site image (images/site/Dockerfile: this image
plus `openssh-server`), or the workers stop saying the image has no sshd.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from components.k8s.facts import PYTORCH_IMAGE
from components.k8s.jobs.gpu_job import MPI_OVER_TCP_NO_HCOLL, GpuJob, MpiMca
from components.k8s.jobs.mpijob import MpiJobSpec, ReplicaSpec, render_mpijob
from components.k8s.jobs.pods import launcher_template, worker_template
from components.k8s.jobs.script_files import SCRIPTS_DIR, scripts_configmap, scripts_mount, scripts_volume
from components.k8s.objects import app_labels

SCRIPT = "ddp_resnet50.py"


@dataclass(frozen=True, kw_only=True)
class PytorchDdpJob(GpuJob):
    """PyTorch DDP ResNet-50 (synthetic data) across all GPU workers."""

    default_name: ClassVar[str] = "pytorch-ddp-resnet50"
    description: ClassVar[str] = "PyTorch benchmark"
    mpi_mca: ClassVar[MpiMca] = MPI_OVER_TCP_NO_HCOLL

    image: str = PYTORCH_IMAGE
    """NVIDIA's PyTorch image (torch, torchvision, Open MPI). Default `nvcr.io/nvidia/pytorch:25.06-py3`."""
    batch_size: int = 64
    """Images per GPU per step. Default 64 (fits a 16 GB vGPU with fp16)."""
    warmup_steps: int = 10
    """Untimed steps first (cuDNN autotuning, NCCL set-up). Default 10."""
    steps: int = 100
    """Timed steps. Default 100."""
    amp: bool = True
    """fp16 autocast, as the legacy job's `--use_fp16`. Default True."""
    master_port: int = 29500
    """Rendezvous port on rank 0's worker; over TCP (host network) it is taken on that node. Default 29500."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size < 1 or self.steps < 1 or self.warmup_steps < 0:
            raise ValueError("batch_size and steps must be positive, warmup_steps not negative")

    @property
    def scripts_configmap_name(self) -> str:
        return f"{self.job_name}-script"

    def env(self) -> dict[str, str]:
        # Rank 0 runs on worker 0; its name resolves through the job's headless Service.
        rendezvous = {
            "MASTER_ADDR": f"{self.job_name}-worker-0.{self.job_name}.{self.namespace}.svc",
            "MASTER_PORT": str(self.master_port),
        }
        return {**rendezvous, **super().env()}

    def program(self) -> list[str]:
        args = [
            "python3",  # Ubuntu 24.04 in the image: `python` exists only where python-is-python3 is installed
            f"{SCRIPTS_DIR}/{SCRIPT}",
            f"--batch-size={self.batch_size}",
            f"--warmup-steps={self.warmup_steps}",
            f"--steps={self.steps}",
        ]
        return [*args, "--amp" if self.amp else "--no-amp"]


def render_pytorch_ddp(job: PytorchDdpJob) -> dict[str, Any]:
    """The benchmark's MPIJob."""
    labels = app_labels(job.job_name, "training-benchmark")
    spec = MpiJobSpec(
        name=job.job_name,
        namespace=job.namespace,
        slots_per_worker=job.shape.gpus,
        run_policy=job.run_policy,
        labels=labels,
        launcher=ReplicaSpec(
            restart_policy=job.launcher_restart_policy,
            template=launcher_template(
                image=job.image, command=job.launcher_command(job.program()), env=job.env(), labels=labels
            ),
        ),
        worker=ReplicaSpec(
            replicas=job.workers,
            template=worker_template(
                image=job.image,
                shape=job.shape,
                labels=labels,
                env={},
                extra_volumes=[scripts_volume(job.scripts_configmap_name)],
                extra_mounts=[scripts_mount()],
            ),
        ),
    )
    return render_mpijob(spec)


def render_pytorch_ddp_objects(job: PytorchDdpJob) -> list[dict[str, Any]]:
    """The ConfigMap holding the script, then the MPIJob whose workers mount it."""
    labels = app_labels(job.job_name, "training-benchmark")
    configmap = scripts_configmap(
        name=job.scripts_configmap_name, namespace=job.namespace, labels=labels, files=[SCRIPT]
    )
    return [configmap, render_pytorch_ddp(job)]
