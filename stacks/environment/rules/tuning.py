"""Rules for `tuning` (Kubeflow Trainer and Katib): releases against the Kubernetes version, what
Katib needs from the cluster, and a sample that can run on the GPU workers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from components.k8s.facts import KATIB_TESTED_KUBERNETES, TRAINER_TESTED_KUBERNETES
from stacks.environment.model import Environment
from stacks.environment.registry import Problem, rule
from stacks.environment.rules.software import PROGRAM_NAMESPACES


@rule
def kubeflow_releases_support_the_kubernetes_version(env: Environment) -> Iterator[Problem]:
    tuning = env.tuning
    if not tuning.enabled:
        return
    minor = int(env.kubernetes.version.split(".")[1])
    releases: list[tuple[str, str, str, Mapping[str, range]]] = [
        ("trainer", "Kubeflow Trainer", tuning.trainer.version, TRAINER_TESTED_KUBERNETES)
    ]
    if tuning.katib.enabled:
        releases.append(("katib", "Katib", tuning.katib.version, KATIB_TESTED_KUBERNETES))
    for key, title, version, table in releases:
        tested = table[version]
        if minor not in tested:
            fix = "tuning.katib.enabled false" if key == "katib" else "tuning.enabled false"
            yield Problem(
                ("tuning", key, "version"),
                f"{title} {version} is tested upstream on Kubernetes 1.{tested.start}-1.{tested.stop - 1}, not "
                f"1.{minor} (kubernetes.version); pick a Kubernetes version in that range, or set {fix}",
            )


@rule
def katib_has_what_it_needs_from_the_cluster(env: Environment) -> Iterator[Problem]:
    tuning = env.tuning
    if not (tuning.enabled and tuning.katib.enabled):
        return
    if tuning.katib.db_storage_class is None:
        yield Problem(
            ("tuning", "katib", "dbStorageClass"),
            "Katib's MySQL keeps every experiment on a 10Gi PersistentVolumeClaim, and this stack creates no "
            "StorageClass: name an existing one (`kubectl get storageclass`), or set tuning.katib.enabled false",
        )
    if env.kubernetes.mode == "bootstrap" and env.kubernetes.gpu_node_taint:
        # kubeflow/katib v0.19.0 pkg/controller.v1beta1/suggestion/composer/composer.go
        # `DesiredDeployment`: no tolerations, no nodeSelector, and KatibConfig's SuggestionConfig
        # (pkg/apis/config/v1beta1/types.go) has no field for either.
        yield Problem(
            ("tuning", "katib", "enabled"),
            "Katib runs each Experiment's suggestion service as a Deployment without tolerations, and with "
            "kubernetes.gpuNodeTaint true every node of this cluster is tainted: it would stay Pending and no "
            "trial would start; set kubernetes.gpuNodeTaint false, or tuning.katib.enabled false",
        )


@rule
def tuning_sample_fits_the_workers(env: Environment) -> Iterator[Problem]:
    tuning = env.tuning
    if not tuning.enabled:
        return
    if tuning.namespace in PROGRAM_NAMESPACES or tuning.namespace in ("kubeflow", "kubeflow-system"):
        yield Problem(("tuning", "namespace"), f"{tuning.namespace!r} is created by something else; pick another")
    elif tuning.namespace == env.jobs.namespace:
        yield Problem(
            ("tuning", "namespace"),
            f"is jobs.namespace too ({tuning.namespace!r}); both create it with their own labels: pick another",
        )
    sample = tuning.sample
    if not sample.enabled:
        return
    workers = len(env.gpu_workers.nodes)
    # Each trial pod asks for all of a worker's vGPUs, so one trial pod per worker.
    if sample.nodes > workers:
        yield Problem(
            ("tuning", "sample", "nodes"),
            f"{sample.nodes} pods per trial, each taking every vGPU of a worker, but there are {workers} GPU "
            f"workers; use at most {workers}",
        )
    elif tuning.katib.enabled and sample.parallel_trials * sample.nodes > workers:
        yield Problem(
            ("tuning", "sample", "parallelTrials"),
            f"{sample.parallel_trials} trials at once of {sample.nodes} pods need {sample.parallel_trials * sample.nodes} "
            f"GPU workers, there are {workers}: without gang scheduling trials holding part of the GPUs can "
            f"deadlock; use at most {workers // sample.nodes}",
        )
    if sample.parallel_trials > sample.max_trials:
        yield Problem(
            ("tuning", "sample", "parallelTrials"),
            f"exceeds tuning.sample.maxTrials ({sample.max_trials}); lower it or raise maxTrials",
        )
