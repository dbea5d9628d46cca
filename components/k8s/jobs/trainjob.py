"""The tuning sample on Kubeflow Trainer v2: a torch TrainingRuntime shaped like our MPIJob workers,
and a Katib Experiment whose trials are TrainJobs (or, without Katib, one TrainJob).

Field names follow the upstream types at the pinned tags:
- kubeflow/trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainingruntime_types.go (TrainingRuntime:
  `mlPolicy.numNodes`, `mlPolicy.torch`, `template.spec` a JobSetSpec) and trainjob_types.go
  (TrainJob: `runtimeRef{name,apiGroup,kind}`, `trainer{image,command,numNodes,resourcesPerNode}`);
- kubeflow/katib v0.19.0 pkg/apis/controller/experiments/v1beta1/experiment_types.go and
  common/v1beta1/common_types.go (Experiment, trialTemplate, metricsCollectorSpec).

How a TrainJob becomes pods (kubeflow/trainer v2.3.0 pkg/runtime/core/trainingruntime.go and
pkg/runtime/framework/plugins/torch/torch.go): the runtime's replicated job labelled
`trainer.kubeflow.org/trainjob-ancestor-step: trainer` runs `trainer.numNodes` pods; in its
container named `node`, `trainer.resourcesPerNode` is merged over the runtime's resources
(strategic merge, per resource), the image and command are replaced, and torchrun's `PET_*`
variables are set (`PET_NPROC_PER_NODE=auto`: one process per GPU). `stacks.tools.plan.admission.trainer`
does the same to check that trials fit.

Workers look like the MPIJobs' (`pods.worker_template`): one `nvidia.com/gpu` per rank, the NVIDIA
RuntimeClass, the GPU toleration and selector, a memory-backed /dev/shm, and over RoCE the RDMA
resource plus IPC_LOCK, with the same NCCL variables (`transport.py`). The program is the
benchmark's ddp_resnet50.py under torchrun; it prints `images_per_sec=<n>`, the form Katib's StdOut
collector reads by default (kubeflow/katib v0.19.0 pkg/metricscollector/v1beta1/common/const.go
`DefaultFilter`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.k8s.jobs.pods import SHM_VOLUME, WorkerShape, drop_net_raw, env_list
from components.k8s.jobs.pytorch_ddp import PYTORCH_IMAGE, SCRIPT
from components.k8s.jobs.script_files import SCRIPTS_DIR, scripts_configmap, scripts_mount, scripts_volume
from components.k8s.jobs.transport import nccl_transport_env
from components.k8s.objects import app_labels, check_dns_label, check_image, gpu_toleration

SAMPLE_IMAGE = PYTORCH_IMAGE
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
KATIB_API = "kubeflow.org/v1beta1"
NODE = "node"
"""The replicated job and container Trainer fills in (pkg/runtime/framework/plugins/jobset constants `Node`)."""
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
METRICS_INJECTION_LABEL = "katib.kubeflow.org/metrics-collector-injection"
"""Katib's pod webhook injects its metrics collector only in namespaces labelled with it
(manifests/v1beta1/components/webhook/webhooks.yaml, `mutator.pod.katib.kubeflow.org`)."""
OBJECTIVE = "images_per_sec"
TORCHRUN_PORT = 29500
"""Where torchrun's rendezvous listens: Trainer's `ContainerTrainerPort` (kubeflow/trainer v2.3.0
pkg/constants/constants.go, 29500), which its torch plugin declares on the node container and
passes as PET_MASTER_PORT. Over TCP (host network) it is taken on the node running rank 0."""


@dataclass(frozen=True, kw_only=True)
class TuningSampleJob:
    """The runtime, and the Experiment (or TrainJob) that uses it."""

    namespace: str
    shape: WorkerShape
    name: str = "ddp-resnet50-tuning"
    runtime_name: str = "gpucluster-torch"
    image: str = SAMPLE_IMAGE
    nodes: int = 2
    """Pods per trial (one per GPU worker)."""
    batch_sizes: Sequence[int] = (32, 64, 128)
    steps: int = 50
    katib: bool = True
    """An Experiment with Katib; one TrainJob (first batch size) without."""
    max_trials: int = 3
    parallel_trials: int = 1
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """More variables for every rank; they override the transport's."""

    def __post_init__(self) -> None:
        check_dns_label(self.name, "tuning sample name")
        check_dns_label(self.runtime_name, "training runtime name")
        check_dns_label(self.namespace, "tuning namespace")
        check_image(self.image, "tuning sample image")
        if self.nodes < 1 or self.steps < 1 or not self.batch_sizes or min(self.batch_sizes) < 1:
            raise ValueError("the tuning sample needs nodes >= 1, steps >= 1 and positive batch sizes")
        if self.parallel_trials > self.max_trials:
            raise ValueError(f"parallel_trials {self.parallel_trials} exceeds max_trials {self.max_trials}")

    @property
    def scripts_configmap_name(self) -> str:
        return f"{self.name}-script"

    @property
    def labels(self) -> dict[str, str]:
        return app_labels(self.name, "tuning-sample")

    def env(self) -> dict[str, str]:
        return {**nccl_transport_env(self.shape.transport), **self.extra_env}


def render_runtime(job: TuningSampleJob) -> dict[str, Any]:
    """A namespaced TrainingRuntime (torch policy) whose `node` pods are our GPU workers."""
    shape = job.shape
    security: dict[str, Any] = {"privileged": False}
    if shape.transport == "roce":
        security["capabilities"] = {"add": ["IPC_LOCK"]}  # verbs pin (register) memory
    container = {
        "name": NODE,
        "image": job.image,
        "env": env_list(job.env()),
        "resources": {"requests": {"cpu": shape.cpu, "memory": shape.memory}},
        "securityContext": security,
        "volumeMounts": [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}, scripts_mount()],
    }
    pod: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "runtimeClassName": shape.runtime_class,
        "nodeSelector": dict(shape.node_selector),
        "tolerations": [gpu_toleration()],
        "containers": [container],
        "volumes": [
            {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": shape.shm_size}},
            scripts_volume(job.scripts_configmap_name),
        ],
    }
    if shape.host_network:
        # Over TCP NCCL's sockets must use the PVRDMA NIC (transport.py); torchrun's rendezvous
        # port then is a host port (Trainer declares it), so two trial pods never share a node.
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"  # PET_MASTER_ADDR is a cluster DNS name
        drop_net_raw(container)
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainingRuntime",
        "metadata": {
            "name": job.runtime_name,
            "namespace": job.namespace,
            "labels": {**job.labels, "trainer.kubeflow.org/framework": "torch"},
        },
        "spec": {
            "mlPolicy": {"numNodes": job.nodes, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": NODE,
                            "template": {
                                "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                                "spec": {"template": {"metadata": {"labels": job.labels}, "spec": pod}},
                            },
                        }
                    ]
                }
            },
        },
    }


def resources_per_node(shape: WorkerShape) -> dict[str, Any]:
    """GPUs (one per rank) and, over RoCE, the RDMA device: what `worker_template` requests."""
    limits: dict[str, Any] = {"nvidia.com/gpu": shape.gpus}
    if shape.transport == "roce":
        limits[shape.rdma_resource] = 1
    return {"limits": limits}


def trainjob_spec(job: TuningSampleJob, batch_size: str) -> dict[str, Any]:
    return {
        "runtimeRef": {"name": job.runtime_name, "apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime"},
        "trainer": {
            "image": job.image,
            # torchrun takes --nnodes, --nproc-per-node, --node-rank and the rendezvous from PET_*.
            "command": [
                "torchrun",
                f"{SCRIPTS_DIR}/{SCRIPT}",
                f"--batch-size={batch_size}",
                f"--steps={job.steps}",
            ],
            "numNodes": job.nodes,
            "resourcesPerNode": resources_per_node(job.shape),
        },
    }


def render_trainjob(job: TuningSampleJob) -> dict[str, Any]:
    """One TrainJob at the first batch size (Trainer without Katib)."""
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {"name": job.name, "namespace": job.namespace, "labels": job.labels},
        "spec": trainjob_spec(job, str(job.batch_sizes[0])),
    }


def render_experiment(job: TuningSampleJob) -> dict[str, Any]:
    """Katib picks batch sizes (random search over the list) to maximise images/sec."""
    return {
        "apiVersion": KATIB_API,
        "kind": "Experiment",
        "metadata": {"name": job.name, "namespace": job.namespace, "labels": job.labels},
        "spec": {
            "objective": {"type": "maximize", "objectiveMetricName": OBJECTIVE},
            "algorithm": {"algorithmName": "random"},
            "parallelTrialCount": job.parallel_trials,
            "maxTrialCount": job.max_trials,
            "maxFailedTrialCount": 1,
            "metricsCollectorSpec": {"collector": {"kind": "StdOut"}},
            "parameters": [
                {
                    "name": "batch_size",
                    "parameterType": "categorical",
                    "feasibleSpace": {"list": [str(b) for b in job.batch_sizes]},
                }
            ],
            "trialTemplate": {
                # Katib defaults the TrainJob's success/failure conditions and primary pod (node 0)
                # (pkg/apis/controller/experiments/v1beta1/experiment_defaults.go).
                "primaryContainerName": NODE,
                "trialParameters": [
                    {"name": "batchSize", "description": "images per GPU per step", "reference": "batch_size"}
                ],
                "trialSpec": {
                    "apiVersion": TRAINER_API,
                    "kind": "TrainJob",
                    "spec": trainjob_spec(job, "${trialParameters.batchSize}"),
                },
            },
        },
    }


def render_tuning_objects(job: TuningSampleJob) -> list[dict[str, Any]]:
    """The script's ConfigMap, the runtime, then the Experiment or the TrainJob."""
    configmap = scripts_configmap(
        name=job.scripts_configmap_name, namespace=job.namespace, labels=job.labels, files=[SCRIPT]
    )
    sample = render_experiment(job) if job.katib else render_trainjob(job)
    return [configmap, render_runtime(job), sample]
