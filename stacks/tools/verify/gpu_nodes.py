"""Reads GPU health from a cluster for `stacks verify`: the stack's GPU workers' Node objects and
each node's dcgm-exporter metrics; the verdict itself is `verify_gpu.judge_node`.

Which exporter: in gpu.mode device-plugin ours (components/k8s/addons/dcgm_exporter.py, namespace
`gpu-monitoring`, labels `EXPORTER_LABELS`); in gpu.mode gpu-operator the operator's own, labelled
`app: nvidia-dcgm-exporter` in the operator's namespace (NVIDIA/gpu-operator
`assets/state-dcgm-exporter/0800_daemonset.yaml`), on the same port 9400.

The metrics are read through the API server's pod proxy (`kubectl get --raw
/api/v1/namespaces/NS/pods/POD:9400/proxy/metrics`), so no port-forward and no route from the
operator's machine to the pod network are needed. The API server refuses to proxy to a pod
without an IP ("address not allowed", kubernetes `pkg/registry/core/pod/strategy.go`
`ResourceLocation`) and answers 503 when nothing listens; either way that node's verdict says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.k8s.addons.dcgm_exporter import EXPORTER_LABELS, METRICS_PORT, DcgmExporterSettings
from components.k8s.addons.gpu_operator import GpuOperatorArgs
from stacks.environment.model import Environment
from stacks.kubectl import Kubectl
from stacks.tools.verify.gpu import NodeHealth, judge_node

OPERATOR_EXPORTER_SELECTOR = "app=nvidia-dcgm-exporter"


@dataclass(frozen=True)
class PodSet:
    """Pods found by a label selector in one namespace."""

    namespace: str
    selector: str


def exporter_pods(env: Environment) -> PodSet | None:
    """Where the stack's dcgm-exporter pods are; None when `monitoring.enabled` is false."""
    if not env.monitoring.enabled:
        return None
    if env.gpu.mode == "gpu-operator":
        return PodSet(GpuOperatorArgs.namespace, OPERATOR_EXPORTER_SELECTOR)
    return PodSet(DcgmExporterSettings.namespace, ",".join(f"{k}={v}" for k, v in EXPORTER_LABELS.items()))


def pods_by_node(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One pod per node, a Running one first (during a rollout a node briefly has two)."""
    found: dict[str, dict[str, Any]] = {}
    for pod in sorted(pods, key=lambda p: p.get("status", {}).get("phase") == "Running"):
        node = pod.get("spec", {}).get("nodeName")
        if node:
            found[node] = pod
    return found


def read_metrics(kubectl: Kubectl, namespace: str, pod: str) -> tuple[str | None, str]:
    """The exporter's /metrics through the pod proxy, or (None, why not)."""
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}:{METRICS_PORT}/proxy/metrics"
    result = kubectl.run("get", "--raw", path)
    if result.returncode != 0:
        return None, result.stderr.strip() or f"kubectl get --raw {path} failed"
    return result.stdout, ""


def gpu_health(kubectl: Kubectl, env: Environment) -> list[NodeHealth]:
    """A verdict per GPU worker of the stack, in the stack's order."""
    nodes = {n["metadata"]["name"]: n for n in kubectl.items("get", "nodes")}
    where = exporter_pods(env)
    exporters = (
        pods_by_node(kubectl.items("get", "pods", "--selector", where.selector, namespace=where.namespace))
        if where
        else {}
    )
    verdicts = []
    for worker in env.gpu_workers.nodes:
        node = nodes.get(worker.name)
        if node is None:
            missing = NodeHealth(worker.name)
            missing.problems.append("not a node of the cluster (kubectl get nodes): has it joined?")
            verdicts.append(missing)
            continue
        if where is None:
            health = judge_node(node, None, expect_metrics=False)
            health.lines.append("metrics: not read (monitoring.enabled is false)")
        elif (pod := exporters.get(worker.name)) is None:
            health = judge_node(node, None)
            health.lines.append(f"no pod {where.selector} in namespace {where.namespace} on this node")
        else:
            name = pod["metadata"]["name"]
            metrics, why = read_metrics(kubectl, where.namespace, name)
            health = judge_node(node, metrics)
            phase = pod.get("status", {}).get("phase", "Unknown")
            health.lines.append(f"exporter: pod {name} ({phase})" + (f": {why}" if why else ""))
        verdicts.append(health)
    return verdicts
