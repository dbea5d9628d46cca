"""The pods Kubeflow Trainer and Katib would create, for the plan's admission check.

A TrainJob names a (Cluster)TrainingRuntime; Trainer builds a JobSet from the runtime's template
and the TrainJob's `trainer` overrides (kubeflow/trainer v2.3.0 pkg/runtime/core/trainingruntime.go
`NewInfo...`, pkg/runtime/framework/plugins/torch/torch.go `EnforceMLPolicy`):

- the replicated job labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer` runs
  `trainer.numNodes` pods (default the runtime's `mlPolicy.numNodes`, then 1);
- in its container `node`, `trainer.resourcesPerNode` is strategic-merged over the container's
  resources (pkg/util/trainingruntime `MergeResourceRequirements`: per resource name), and the
  image, command, args and env are taken from `trainer`.

A Katib Experiment whose trialSpec is a TrainJob runs `parallelTrialCount` such TrainJobs at once
(kubeflow/katib v0.19.0). Katib adds two things to what is scheduled:

- its metrics collector, injected as a sidecar into each trial's primary pod (node 0), with the
  KatibConfig default resources (pkg/apis/config/v1beta1/defaults.go: requests 50m CPU, 10Mi;
  its 500Mi ephemeral-storage request is not modelled, the node model has no disk);
- each Experiment's suggestion service, a Deployment `<experiment>-<algorithm>` in the
  Experiment's namespace with the same default requests and no tolerations or nodeSelector
  (pkg/controller.v1beta1/suggestion/composer/composer.go `DesiredDeployment`).

Other replicated jobs of a runtime (dataset/model initializers) run before the trainer and are
not modelled; our runtime has none.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from stacks.tools.plan.admission.model import PodGroup, Workload

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
NODE = "node"
KATIB_SIDECAR_REQUESTS = {"cpu": "50m", "memory": "10Mi"}
"""Katib's default metrics-collector and suggestion requests (cpu, memory)."""


def _runtime(spec: Mapping[str, Any], namespace: str, objs: Sequence[Any]) -> Mapping[str, Any] | None:
    ref = spec.get("runtimeRef") or {}
    kind = ref.get("kind") or "ClusterTrainingRuntime"  # the CRD's default
    for obj in objs:
        if not isinstance(obj, Mapping) or obj.get("kind") != kind:
            continue
        meta = obj.get("metadata") or {}
        if meta.get("name") == ref.get("name") and (
            kind == "ClusterTrainingRuntime" or meta.get("namespace", "default") == namespace
        ):
            return obj
    return None


def _merge_resources(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for part in ("limits", "requests", "claims"):
        if part in base or part in override:
            if part == "claims":
                merged[part] = override.get(part, base.get(part))
            else:
                merged[part] = {**(base.get(part) or {}), **(override.get(part) or {})}
    return merged


def trainer_pods(spec: Mapping[str, Any], namespace: str, objs: Sequence[Any]) -> tuple[int, dict[str, Any]] | str:
    """(number of trainer pods, their pod spec) for a TrainJob spec, or why it cannot run."""
    ref = spec.get("runtimeRef") or {}
    runtime = _runtime(spec, namespace, objs)
    if runtime is None:
        kind = ref.get("kind") or "ClusterTrainingRuntime"
        return f"its runtime {kind} {ref.get('name')!r} is not in the plan: Trainer refuses the TrainJob"
    runtime_spec = runtime.get("spec") or {}
    replicated = ((runtime_spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
    trainer_job = next(
        (
            r
            for r in replicated
            if ((r.get("template") or {}).get("metadata") or {}).get("labels", {}).get(ANCESTOR_LABEL) == "trainer"
        ),
        None,
    )
    if trainer_job is None:
        return f"runtime {ref.get('name')!r} has no replicated job labelled {ANCESTOR_LABEL}: trainer"
    pod = copy.deepcopy(trainer_job["template"]["spec"]["template"]["spec"])
    trainer = spec.get("trainer") or {}
    count = int(trainer.get("numNodes") or (runtime_spec.get("mlPolicy") or {}).get("numNodes") or 1)
    for container in pod.get("containers") or []:
        if container.get("name") != NODE:
            continue
        for key in ("image", "command", "args"):
            if key in trainer:
                container[key] = trainer[key]
        if trainer.get("env"):
            names = {e["name"] for e in trainer["env"]}
            container["env"] = [e for e in container.get("env") or [] if e["name"] not in names] + trainer["env"]
        if "resourcesPerNode" in trainer:
            container["resources"] = _merge_resources(container.get("resources") or {}, trainer["resourcesPerNode"])
    return count, pod


def with_metrics_collector(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The primary trial pod after Katib's pod webhook (resources only)."""
    sidecar = {
        "name": "metrics-logger-and-collector",
        "resources": {"requests": dict(KATIB_SIDECAR_REQUESTS)},
    }
    return {**pod, "containers": [*(pod.get("containers") or []), sidecar]}


def suggestion_pod(algorithm: str) -> dict[str, Any]:
    """The pod of an Experiment's suggestion Deployment, as Katib creates it."""
    return {"containers": [{"name": algorithm, "resources": {"requests": dict(KATIB_SIDECAR_REQUESTS)}}]}


def trainer_workloads(obj: Mapping[str, Any], objs: list[Any]) -> list[Workload]:
    """A TrainJob's trainer pods; an Experiment's trials at once (TrainJobs) and its suggestion
    service (stacks/tools/plan/admission/trainer.py)."""
    meta = obj.get("metadata") or {}
    namespace, name, spec = meta.get("namespace", "default"), meta["name"], obj.get("spec") or {}
    if obj["kind"] == "TrainJob":
        pods = trainer_pods(spec, namespace, objs)
        if isinstance(pods, str):
            return [Workload("TrainJob", namespace, name, (), obj, problem=pods)]
        return [Workload("TrainJob", namespace, name, (PodGroup("node", pods[0], pods[1]),), obj)]
    trial = ((spec.get("trialTemplate") or {}).get("trialSpec")) or {}
    algorithm = (spec.get("algorithm") or {}).get("algorithmName", "random")
    suggestion = Workload(
        "Deployment", namespace, f"{name}-{algorithm}", (PodGroup("pod", 1, suggestion_pod(algorithm)),), obj
    )
    if trial.get("kind") != "TrainJob":
        return [suggestion]  # other trial kinds are not modelled
    pods = trainer_pods(trial.get("spec") or {}, namespace, objs)
    if isinstance(pods, str):
        return [suggestion, Workload("Experiment", namespace, name, (), obj, problem=f"trials: {pods}")]
    count, pod = pods
    parallel = int(spec.get("parallelTrialCount") or 3)  # Katib's default (experiment_defaults.go)
    groups = [PodGroup("trial node 0", parallel, with_metrics_collector(pod))]
    if count > 1:
        groups.append(PodGroup("trial node", parallel * (count - 1), pod))
    return [suggestion, Workload("Experiment", namespace, name, tuple(groups), obj)]
