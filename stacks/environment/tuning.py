"""The `tuning` settings: Kubeflow Trainer v2 (TrainJob) and Katib, with a sample Experiment.

Off by default: both add controllers (Trainer with JobSet; Katib with its DB), and Katib's DB needs
a StorageClass this stack does not create. Which releases can be pinned, and on which Kubernetes
minors they are tested, lives in `components.k8s.addons.kubeflow_tuning` (with its sources).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.k8s.facts import PYTORCH_IMAGE
from stacks.environment.base import Model
from stacks.environment.fields import DnsLabel, DnsSubdomain, PinnedImage

# The releases whose objects the tests check (components/k8s/addons/kubeflow_tuning.py holds
# their URLs and the Kubernetes minors upstream tests them on).
TrainerVersion = Literal["2.3.0"]
KatibVersion = Literal["0.19.0"]


class TrainerSettings(Model):
    version: TrainerVersion = "2.3.0"
    """Kubeflow Trainer release (TrainJob `trainer.kubeflow.org/v1alpha1`, JobSet included);
    default 2.3.0, tested upstream on Kubernetes 1.32-1.35."""
    manifest_url: str | None = None
    """Kustomize folder the provider builds Trainer from; default the release's
    `manifests/overlays/manager` on GitHub (set a mirror of the same tag without GitHub access)."""


class KatibSettings(Model):
    enabled: bool = True
    """Install Katib (hyperparameter tuning) next to Trainer, and run the sample as an Experiment
    whose trials are TrainJobs; default true. False: Trainer alone, the sample as one TrainJob."""
    version: KatibVersion = "0.19.0"
    """Katib release; default 0.19.0, the first with TrainJob trials (tested upstream on
    Kubernetes 1.31-1.34)."""
    db_storage_class: DnsSubdomain | None = None
    """StorageClass of the 10Gi volume of Katib's MySQL (experiment and trial history). Required
    with Katib: this stack creates no StorageClass, and without one the claim never binds."""
    manifest_url: str | None = None
    """Kustomize folder of Katib's standalone install; default the release's
    `manifests/v1beta1/installs/katib-standalone` on GitHub."""


class TuningSample(Model):
    enabled: bool = True
    """Create the sample (an Experiment with Katib, a TrainJob without); default true once
    `tuning.enabled`. It wants GPUs: keep the fabric check and the benchmark off meanwhile."""
    image: PinnedImage = PYTORCH_IMAGE
    """Image of the trial pods (torch, torchvision); default NVIDIA's PyTorch image of the
    benchmark, nvcr.io/nvidia/pytorch:25.06-py3."""
    nodes: int = Field(default=2, ge=1)
    """Pods (GPU workers) per trial; default 2, so NCCL crosses the RDMA fabric."""
    batch_sizes: list[int] = Field(default_factory=lambda: [32, 64, 128], min_length=1)
    """Batch sizes per GPU the Experiment tries (a categorical parameter); objective: the most
    images/sec. Without Katib the TrainJob runs the first one."""
    steps: int = Field(default=50, ge=1)
    """Timed steps per trial."""
    max_trials: int = Field(default=3, ge=1)
    """Trials the Experiment runs in all."""
    parallel_trials: int = Field(default=1, ge=1)
    """Trials at once; with `nodes` they must fit the GPU workers together (checked by `plan`)."""


class Tuning(Model):
    enabled: bool = False
    """Install Kubeflow Trainer v2 (and Katib) and the sample; default false."""
    namespace: DnsLabel = "tuning"
    """Namespace of the sample's runtime, TrainJobs and Experiment (created by the program)."""
    trainer: TrainerSettings = TrainerSettings()
    """The Trainer release."""
    katib: KatibSettings = KatibSettings()
    """The Katib release and its DB volume."""
    sample: TuningSample = TuningSample()
    """The sample Experiment (or TrainJob)."""
