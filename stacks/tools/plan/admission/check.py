"""The plan's admission check: would every workload the stack renders actually run, and where?

From the environment it models the nodes (`stacks.tools.plan.admission.nodes`); from the plan it takes every
pod template: Deployments, DaemonSets, Jobs, Pods, MPIJob Launcher/Worker replicas from the
ConfigGroups, TrainJobs and Katib Experiments (their trials and suggestion service, through
`stacks.tools.plan.admission.trainer`), and the Helm-rendered GPU Operator's workloads as far as the
chart values decide their placement. Then, as the cluster would:

1. DaemonSets: on each node, its pod is placed when the node passes nodeSelector/affinity, taints
   and RuntimeClass handler and has room. A DaemonSet placed nowhere fails. A device plugin
   advertises its resource only on the nodes where it runs: `nvidia.com/gpu` (one per vGPU) from
   NVIDIA's device plugin or the GPU Operator's operands, `<prefix>/<name>` (`rdmaHcaMax`) from the
   RDMA shared device plugin's `config.json` on nodes with a PVRDMA NIC. A GPU worker left without
   its device plugin fails the plugin's verdict.
2. Deployments (all replicas, long-running) are placed next and keep their room.
3. Jobs, MPIJobs, TrainJobs and an Experiment's parallel trials are each placed whole (an MPIJob's workers and launcher must run at once)
   on what is left. That they fit one after another, not together, is reported, not refused.

Each verdict is one line: `OK`, `WARN` (runs, but not as meant) or `FAIL` (cannot run).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from components.k8s.addons.gpu_operator import driver_image_tag, visible_pod_templates
from components.k8s.gpu_runtime import NVIDIA_RUNTIME_CLASS, NVIDIA_RUNTIME_HANDLER
from stacks.environment.model import Environment
from stacks.tools.plan.admission.coverage import fabric_coverage, is_fabric_check
from stacks.tools.plan.admission.model import PodGroup, Workload
from stacks.tools.plan.admission.nodes import ClusterModel, PlannedNode, cluster_model
from stacks.tools.plan.admission.rules import (
    RuntimeClassModel,
    placement_problem,
    pod_requests,
    shortfall,
    with_runtime_class,
)
from stacks.tools.plan.admission.trainer import trainer_workloads
from stacks.tools.plan.command import kubernetes_objects
from stacks.tools.plan.mock_runtime import ProgramRun

GPU_RESOURCE = "nvidia.com/gpu"
_HELM_CHART = "kubernetes:helm.sh/v4:Chart"
_OPERANDS = "gpu-operator-operands"


@dataclass(frozen=True)
class Verdict:
    status: str
    """OK, WARN or FAIL."""
    workload: str
    detail: str

    def __str__(self) -> str:
        return f"{self.status:<4} {self.workload}: {self.detail}"


@dataclass
class AdmissionReport:
    verdicts: list[Verdict] = field(default_factory=list)
    assumptions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    """What the stack needs from outside to run as checked (e.g. the driver image tag)."""

    @property
    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "FAIL"]

    def as_dict(self) -> dict[str, Any]:
        """For machine-readable output (`plan --json`)."""
        return {
            "admitted": not self.failures,
            "assumptions": list(self.assumptions),
            "verdicts": [{"status": v.status, "workload": v.workload, "detail": v.detail} for v in self.verdicts],
            "notes": list(self.notes),
        }

    def lines(self) -> list[str]:
        return (
            [f"assumed: {a}" for a in self.assumptions]
            + [str(v) for v in self.verdicts]
            + [f"note: {n}" for n in self.notes]
        )


def workloads_of(objs: Iterable[Any]) -> list[Workload]:
    """Every pod-creating object with the pod groups it creates."""
    found = []
    objs = list(objs)
    for obj in objs:
        if not isinstance(obj, Mapping) or "kind" not in obj:
            continue  # a redacted (secret) entry
        kind, spec = obj["kind"], obj.get("spec") or {}
        if kind in ("TrainJob", "Experiment"):
            found.extend(trainer_workloads(obj, objs))
            continue
        groups: list[PodGroup] = []
        if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
            groups = [PodGroup("pod", int(spec.get("replicas", 1)), spec["template"]["spec"])]
        elif kind == "DaemonSet":
            groups = [PodGroup("pod", 1, spec["template"]["spec"])]
        elif kind == "Job":
            groups = [PodGroup("pod", int(spec.get("parallelism", 1)), spec["template"]["spec"])]
        elif kind == "Pod":
            groups = [PodGroup("pod", 1, spec)]
        elif kind == "MPIJob":
            replicas = spec.get("mpiReplicaSpecs") or {}
            # Workers first: they are the large ones; the launcher goes where room is left.
            groups = [
                PodGroup(role, int(replicas[role].get("replicas", 1)), replicas[role]["template"]["spec"])
                for role in ("Worker", "Launcher")
                if role in replicas
            ]
        if groups:
            meta = obj.get("metadata") or {}
            found.append(Workload(kind, meta.get("namespace", "default"), meta["name"], tuple(groups), obj))
    return found


def plan_objects(run: ProgramRun) -> tuple[list[Any], list[RuntimeClassModel]]:
    """The Kubernetes objects a plan applies, the chart-rendered stand-ins included, and the
    RuntimeClasses that will exist."""
    objs: list[Any] = [obj for _, group in kubernetes_objects(run.resources) for obj in group]
    runtime_classes = [
        RuntimeClassModel.from_object(o) for o in objs if isinstance(o, Mapping) and o.get("kind") == "RuntimeClass"
    ]
    for resource in run.resources:
        if resource.type == _HELM_CHART and resource.redacted_inputs().get("chart") == "gpu-operator":
            inputs = resource.redacted_inputs()
            values = inputs.get("values") or {}
            objs.extend(visible_pod_templates(values, inputs.get("namespace", "gpu-operator")))
            # The operator creates this RuntimeClass (name and handler alike) itself.
            name = (values.get("operator") or {}).get("runtimeClass", NVIDIA_RUNTIME_CLASS)
            runtime_classes.append(RuntimeClassModel(name=name, handler=name))
    return objs, runtime_classes


def _names(nodes: list[str]) -> str:
    return ", ".join(nodes) if len(nodes) <= 3 else f"{', '.join(nodes[:2])} and {len(nodes) - 2} more"


def _why_nowhere(reasons: Mapping[str, list[str]]) -> str:
    return "; ".join(f"{_names(nodes)}: {reason}" for reason, nodes in reasons.items())


def _images(workload: Workload) -> list[str]:
    return [c.get("image", "").split("@")[0].rsplit(":", 1)[0] for c in workload.groups[0].spec.get("containers") or []]


def _is_nvidia_device_plugin(workload: Workload) -> bool:
    return any(image.endswith("/k8s-device-plugin") for image in _images(workload))


def _is_gpu_exporter(workload: Workload) -> bool:
    """NVIDIA's dcgm-exporter: like the device plugin it needs NVML and belongs on every GPU node."""
    return any(image.endswith("/dcgm-exporter") for image in _images(workload))


def _advertised(workload: Workload, objs: list[Any], node: PlannedNode) -> dict[str, Fraction]:
    """Extended resources a device-plugin DaemonSet advertises on `node` (recognised by upstream's
    image names; the GPU Operator's operands by their stand-in)."""
    pod = workload.groups[0].spec
    if workload.name == _OPERANDS or _is_nvidia_device_plugin(workload):
        return {GPU_RESOURCE: Fraction(node.gpus)} if node.gpus else {}
    if any(image.endswith("/k8s-rdma-shared-dev-plugin") for image in _images(workload)) and node.pvrdma:
        advertised: dict[str, Fraction] = {}
        for volume in pod.get("volumes") or []:
            config_map = (volume.get("configMap") or {}).get("name")
            for obj in objs:
                if (
                    isinstance(obj, Mapping)
                    and obj.get("kind") == "ConfigMap"
                    and obj["metadata"]["name"] == config_map
                    and obj["metadata"].get("namespace") == workload.namespace
                    and "config.json" in (obj.get("data") or {})
                ):
                    for entry in json.loads(obj["data"]["config.json"]).get("configList", []):
                        resource = f"{entry.get('resourcePrefix', 'rdma')}/{entry['resourceName']}"
                        advertised[resource] = Fraction(int(entry.get("rdmaHcaMax", 0)))
        return advertised
    return {}


class _Check:
    def __init__(self, cluster: ClusterModel, objs: list[Any], runtime_classes: list[RuntimeClassModel]) -> None:
        self.cluster = cluster
        self.objs = objs
        self.runtime_classes = {rc.name: rc for rc in runtime_classes}
        self.free: dict[str, dict[str, Fraction]] = {p.node.name: dict(p.node.allocatable) for p in cluster.nodes}
        self.report = AdmissionReport(assumptions=cluster.assumptions)

    def add(self, status: str, workload: Workload, detail: str) -> None:
        self.report.verdicts.append(Verdict(status, workload.title, detail))

    def daemonset(self, workload: Workload) -> None:
        # The DaemonSet controller also adds tolerations of the node-condition taints
        # (node.kubernetes.io/not-ready, unreachable, *-pressure, unschedulable); the modelled
        # nodes are healthy and carry none, so they change nothing here.
        pod = with_runtime_class(workload.groups[0].spec, self.runtime_classes)
        requests = pod_requests(pod, self._overhead(pod))
        placed: list[PlannedNode] = []
        reasons: dict[str, list[str]] = {}
        for planned in self.cluster.nodes:
            name = planned.node.name
            problem = placement_problem(pod, planned.node, self.runtime_classes) or shortfall(requests, self.free[name])
            if problem:
                reasons.setdefault(problem, []).append(name)
                continue
            placed.append(planned)
            for resource, amount in requests.items():
                self.free[name][resource] -= amount
        if not placed:
            self.add("FAIL", workload, f"runs on no node: {_why_nowhere(reasons)}")
            return
        needs_nvml = _is_nvidia_device_plugin(workload) or _is_gpu_exporter(workload)
        if needs_nvml and self._handler(pod) != NVIDIA_RUNTIME_HANDLER:
            # The plugin and the exporter find GPUs through NVML, which only the NVIDIA runtime
            # mounts into a container.
            loses = f"advertises no {GPU_RESOURCE}" if _is_nvidia_device_plugin(workload) else "sees no GPU"
            self.add(
                "FAIL",
                workload,
                f"runs under containerd's default runtime (runc), not the NVIDIA one: it cannot load NVML "
                f"and {loses} (name RuntimeClass {NVIDIA_RUNTIME_CLASS})",
            )
            return
        advertised: dict[str, Fraction] = {}
        for planned in placed:
            for resource, amount in _advertised(workload, self.objs, planned).items():
                self.free[planned.node.name][resource] = (
                    self.free[planned.node.name].get(resource, Fraction(0)) + amount
                )
                advertised[resource] = advertised.get(resource, Fraction(0)) + amount
        missed = [p.node.name for p in self.cluster.nodes if p not in placed and _advertised(workload, self.objs, p)]
        where = f"runs on {len(placed)} of {len(self.cluster.nodes)} nodes ({_names([p.node.name for p in placed])})"
        if missed:
            why = _why_nowhere(
                {r: [n for n in ns if n in missed] for r, ns in reasons.items() if set(ns) & set(missed)}
            )
            self.add("FAIL", workload, f"{where}; not on {_names(missed)}, whose devices it should advertise: {why}")
            return
        if _is_gpu_exporter(workload):
            unwatched = [p.node.name for p in self.cluster.nodes if p.gpus and p not in placed]
            if unwatched:
                why = _why_nowhere(
                    {r: [n for n in ns if n in unwatched] for r, ns in reasons.items() if set(ns) & set(unwatched)}
                )
                self.add("FAIL", workload, f"{where}; not on {_names(unwatched)}, whose GPUs it should watch: {why}")
                return
            where += f"; watches {sum(1 for p in placed if p.gpus)} GPU worker(s)"
        offers = ", ".join(f"{r} x{float(a):g}" for r, a in sorted(advertised.items()))
        self.add("OK", workload, where + (f"; advertises {offers}" if offers else ""))

    def _handler(self, pod: Mapping[str, Any]) -> str:
        name = pod.get("runtimeClassName")
        return self.runtime_classes[name].handler if name else "runc"

    def _overhead(self, pod: Mapping[str, Any]) -> Mapping[str, Any]:
        name = pod.get("runtimeClassName")
        return self.runtime_classes[name].overhead if name else {}

    def _fit(self, workload: Workload, free: dict[str, dict[str, Fraction]]) -> tuple[list[str], list[str], str | None]:
        """Place every replica of every group of `workload` on `free` (which it consumes).

        Returns the nodes used, warnings, and why a replica fits nowhere (None when all fit).
        Replicas go first-fit in node order: exact for identical pods, and the groups are
        placed largest first (an MPIJob's workers before its launcher).
        """
        where: list[str] = []
        warnings: list[str] = []
        for group in workload.groups:
            pod = with_runtime_class(group.spec, self.runtime_classes)
            requests = pod_requests(pod, self._overhead(pod))
            if requests.get(GPU_RESOURCE) and pod.get("runtimeClassName") is None:
                warnings.append(
                    f"{group.role} gets {GPU_RESOURCE} but names no RuntimeClass: it starts under runc and "
                    f"sees no GPU (set runtimeClassName: {NVIDIA_RUNTIME_CLASS})"
                )
            reasons: dict[str, list[str]] = {}
            candidates = []
            for planned in self.cluster.nodes:
                problem = placement_problem(pod, planned.node, self.runtime_classes)
                if problem:
                    reasons.setdefault(problem, []).append(planned.node.name)
                else:
                    candidates.append(planned.node.name)
            for replica in range(group.replicas):
                target = next((n for n in candidates if shortfall(requests, free[n]) is None), None)
                if target is None:
                    for name in candidates:
                        reasons.setdefault(str(shortfall(requests, free[name])), []).append(name)
                    return (
                        where,
                        warnings,
                        f"{group.role} {replica + 1} of {group.replicas} fits no node: {_why_nowhere(reasons)}",
                    )
                for resource, amount in requests.items():
                    free[target][resource] -= amount
                where.append(target)
        return where, warnings, None

    def _free_copy(self) -> dict[str, dict[str, Fraction]]:
        return {name: dict(resources) for name, resources in self.free.items()}

    def fits_together(self, workloads: list[Workload]) -> bool:
        """Whether all of `workloads` fit at once on what is free (nothing is recorded)."""
        free = self._free_copy()
        return all(self._fit(workload, free)[2] is None for workload in workloads)

    def place(self, workload: Workload, *, keep: bool) -> None:
        """All replicas of all groups at once; `keep` leaves their room taken (long-running)."""
        free = self._free_copy()
        where, warnings, failure = self._fit(workload, free)
        if failure:
            self.add("FAIL", workload, failure)
            return
        if keep:
            self.free = free
        detail = f"{sum(g.replicas for g in workload.groups)} pod(s) on {_names(sorted(set(where)))}"
        if is_fabric_check(workload):  # it must cover every GPU worker and GPU (coverage.py)
            status, detail = fabric_coverage(workload, where[: workload.groups[0].replicas], self.cluster)
            if status == "FAIL":
                self.add(status, workload, detail)
                return
        self.add("WARN" if warnings else "OK", workload, "; ".join([detail, *warnings]))


def check(cluster: ClusterModel, objs: list[Any], runtime_classes: list[RuntimeClassModel]) -> AdmissionReport:
    """Every workload among `objs` judged against `cluster` (pure: no Pulumi, no environment)."""
    state = _Check(cluster, objs, runtime_classes)
    # Sorted: a plan's registration order varies from run to run, its verdicts must not.
    workloads = sorted(workloads_of(objs), key=lambda w: w.title)
    for workload in workloads:
        if workload.problem is not None:
            state.add("FAIL", workload, workload.problem)
            continue
        try:
            with_runtime_class(workload.groups[0].spec, state.runtime_classes)
            for group in workload.groups:
                with_runtime_class(group.spec, state.runtime_classes)
        except ValueError as refused:
            state.add("FAIL", workload, str(refused))
            continue
        if workload.kind == "DaemonSet":
            state.daemonset(workload)
    failed = {v.workload for v in state.report.failures}
    for workload in workloads:
        if workload.kind in ("Deployment", "StatefulSet", "ReplicaSet") and workload.title not in failed:
            state.place(workload, keep=True)
    jobs = [w for w in workloads if w.kind in ("Job", "Pod", "MPIJob", "TrainJob", "Experiment")]
    for workload in jobs:
        if workload.title not in failed:
            state.place(workload, keep=False)
    runnable = [w for w in jobs if w.title not in {v.workload for v in state.report.failures}]
    if len(runnable) > 1 and not state.fits_together(runnable):
        # Each fits alone; together they queue. Without gang scheduling, jobs whose pods all
        # start at once can each hold part of the GPUs and wait for the rest (issue 16.2).
        state.report.verdicts.append(
            Verdict(
                "WARN",
                " + ".join(f"{w.namespace}/{w.name}" for w in runnable),
                "each fits alone but not all at once: they run one after another, and without gang "
                "scheduling can deadlock holding part of the GPUs each",
            )
        )
    return state.report


def driver_image_note(env: Environment) -> str | None:
    """Which driver image the GPU Operator will pull for the stack's template OS."""
    settings = env.gpu.gpu_operator
    if env.gpu.mode != "gpu-operator" or settings is None:
        return None
    template_os = env.vcenter.template_os
    os_id = "almalinux" if template_os.startswith("alma") else template_os[:-1]
    # Alma keeps the minor release in the tag, which the stack does not know.
    version = f"{template_os[-1]}.<minor>" if os_id == "almalinux" else template_os[-1]
    tag = driver_image_tag(settings.driver_version, os_id, version)
    return (
        f"the GPU Operator will pull {settings.driver_repository}/driver:{tag} for vcenter.templateOs "
        f"{template_os}: push the vGPU guest driver image under that tag"
    )


def admission_report(env: Environment, run: ProgramRun) -> AdmissionReport:
    """The admission check of a planned stack."""
    objs, runtime_classes = plan_objects(run)
    report = check(cluster_model(env), objs, runtime_classes)
    note = driver_image_note(env)
    report.notes = (note,) if note else ()
    return report
