"""Rules for `tuning` (Kubeflow Trainer and Katib): releases against the Kubernetes version, what
Katib needs from the cluster, and a sample that can run on the GPU workers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from components.k8s.facts import (
    KATIB_NEWEST_RELEASE,
    KATIB_RUNS_ON_KUBERNETES,
    KATIB_TESTED_KUBERNETES,
    TRAINER_NEWEST_RELEASE,
    TRAINER_RUNS_ON_KUBERNETES,
    TRAINER_TESTED_KUBERNETES,
)
from stacks.environment.model import Environment
from stacks.environment.registry import Problem, rule
from stacks.environment.rules.software import PROGRAM_NAMESPACES


@dataclass(frozen=True)
class Release:
    key: str
    title: str
    version: str
    tested: range
    runs_on: range
    newest: str


def kubeflow_releases(env: Environment) -> list[Release]:
    """The Trainer and (when enabled) Katib releases a stack with `tuning` enabled installs."""
    tuning = env.tuning
    if not tuning.enabled:
        return []
    trainer = tuning.trainer.version
    releases = [
        Release("trainer", "Kubeflow Trainer", trainer, TRAINER_TESTED_KUBERNETES[trainer],
                TRAINER_RUNS_ON_KUBERNETES[trainer], TRAINER_NEWEST_RELEASE)
    ]  # fmt: skip
    if tuning.katib.enabled:
        katib = tuning.katib.version
        releases.append(
            Release("katib", "Katib", katib, KATIB_TESTED_KUBERNETES[katib], KATIB_RUNS_ON_KUBERNETES[katib],
                    KATIB_NEWEST_RELEASE)
        )  # fmt: skip
    return releases


def _span(minors: range) -> str:
    return f"1.{minors.start}-1.{minors.stop - 1}"


@rule
def kubeflow_releases_support_the_kubernetes_version(env: Environment) -> Iterator[Problem]:
    minor = int(env.kubernetes.version.split(".")[1])
    releases = kubeflow_releases(env)
    trainer_runs = minor in releases[0].runs_on if releases else False
    for release in releases:
        if minor in release.runs_on:
            continue  # tested there, or built for it (validate warns: untested_kubeflow_releases)
        newest = release.version == release.newest
        which = f", the newest {release.title} release (kubeflow/{release.key} v{release.newest})," if newest else ""
        runs = "" if release.runs_on == release.tested else f" and runs on Kubernetes {_span(release.runs_on)}"
        if release.key == "katib":
            fix = "set tuning.katib.enabled false" + (
                f" (Kubeflow Trainer alone runs on 1.{minor})" if trainer_runs else ""
            )
        else:
            fix = "set tuning.enabled false"
        yield Problem(
            ("tuning", release.key, "version"),
            f"{release.title} {release.version}{which} is tested upstream on Kubernetes {_span(release.tested)}"
            f"{runs}, not 1.{minor} (kubernetes.version)"
            + (f"; no {release.title} release is known to run on 1.{minor} yet" if newest else "")
            + f": pick a Kubernetes version in that range, or {fix}",
        )


def untested_kubeflow_releases(env: Environment) -> list[str]:
    """Warnings for `validate` and `plan`: a release on a minor it is built for but upstream does
    not test it on (Trainer 2.3.0 on 1.36)."""
    minor = int(env.kubernetes.version.split(".")[1])
    return [
        f"tuning.{release.key}.version {release.version}: {release.title} {release.version} is tested upstream on "
        f"Kubernetes {_span(release.tested)} and built with Kubernetes 1.{release.runs_on.stop - 1}'s client "
        f"libraries; on 1.{minor} it runs untested upstream (components/k8s/facts.py)"
        for release in kubeflow_releases(env)
        if minor in release.runs_on and minor not in release.tested
    ]


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
