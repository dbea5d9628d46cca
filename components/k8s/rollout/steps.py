"""The cluster side of a rolling change, against the Kubernetes API: whether a node still has a
change to finish (`RolloutGeneration`), and waiting until a replaced node is back (`RolloutSettle`).
The order between nodes is Pulumi's (`components.k8s.rollout.rollout` explains the design).

Pure of Pulumi: each function takes an API client (`KubeApi`, or the test double) and a `Timing`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from components.k8s.api.client import quote
from components.k8s.facts import GPU_RESOURCE
from components.k8s.rollout.drain import POLL_SECONDS, Api

GENERATION_LABEL = "gpucluster.io/generation"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
"""Set by kubeadm's `mark-control-plane` phase, the last phase of a control-plane join, after the
node's etcd member joined (kubernetes cmd/kubeadm/app/cmd/phases/join/controlplanejoin.go)."""
"""What the NVIDIA device plugin advertises per vGPU (device-plugin and GPU Operator modes alike)."""
DEFAULT_WAIT_SECONDS = 45 * 60
"""How long a node may take to come back: clone (minutes for a full clone), first boot with package
installs, kubeadm join. Stack key `kubernetes.rolloutTimeoutMinutes`."""
STEADY_SECONDS = 60.0
"""How long a node must stay Ready on one boot before it counts as back. A deleted VM's Node, if
nothing deleted it, still shows Ready until the node controller marks it Unknown after
`--node-monitor-grace-period` (40 s; 50 s from Kubernetes 1.32, kubernetes/kubernetes#126287);
a streak longer than that is a kubelet that is really running."""
_PASSING_STATUSES = (429, 500, 502, 503, 504)
"""Answers of an API server behind a load balancer while a control-plane member is replaced or
etcd elects a leader: not yet, ask again."""


class RolloutError(Exception):
    """A node did not come back in time, or the API server refused a call for good."""


class NotYet(Exception):
    """The API server did not answer this time (refused, timed out, 5xx, 429)."""


@dataclass(frozen=True)
class NodeState:
    found: bool
    ready: bool = False
    boot_id: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    gpus: int = 0
    kubelet_version: str = ""
    """`status.nodeInfo.kubeletVersion`, e.g. `v1.35.0`."""


def node_state(api: Api, node: str) -> NodeState:
    try:
        answer = api.request("GET", f"/api/v1/nodes/{quote(node)}")
    except OSError as error:
        raise NotYet(str(error)) from None
    if answer.status == 404:
        return NodeState(found=False)
    if answer.status in _PASSING_STATUSES:
        raise NotYet(f"HTTP {answer.status} {answer.message}".rstrip())
    if answer.status != 200:
        raise RolloutError(f"reading node {node}: HTTP {answer.status} {answer.message}".rstrip())
    status = answer.body.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    try:
        gpus = int((status.get("allocatable") or {}).get(GPU_RESOURCE) or 0)
    except ValueError:
        gpus = 0
    return NodeState(
        found=True,
        ready=ready,
        boot_id=str((status.get("nodeInfo") or {}).get("bootID") or ""),
        labels=dict((answer.body.get("metadata") or {}).get("labels") or {}),
        gpus=gpus,
        kubelet_version=str((status.get("nodeInfo") or {}).get("kubeletVersion") or ""),
    )


def change_pending(api: Api, node: str, generation: str, kubernetes_version: str = "") -> bool:
    """Whether `node` has yet to finish its change to `generation` (its settle labels it when it has)
    or to `kubernetes_version` (its kubelet reports it once its new VM joined). When the API server
    does not answer, pending: the next node then waits for this one, which is the safe side."""
    try:
        state = node_state(api, node)
    except (NotYet, RolloutError):
        return True
    if kubernetes_version and not runs_version(state, kubernetes_version):
        return True
    return state.labels.get(GENERATION_LABEL) != generation


def runs_version(state: NodeState, version: str) -> bool:
    """Whether the node's kubelet reports `version` ("1.35.0" or "v1.35.0")."""
    return state.kubelet_version == "v" + version.removeprefix("v")


@dataclass(frozen=True)
class Timing:
    timeout_seconds: float = DEFAULT_WAIT_SECONDS
    poll_seconds: float = POLL_SECONDS
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def settle(
    api: Api,
    node: str,
    generation: str,
    *,
    control_plane: bool,
    gpus: int = 0,
    kubelet_version: str = "",
    timing: Timing = Timing(),
) -> None:
    """Until `node` is back: Ready on one boot for `STEADY_SECONDS`, on a control-plane node marked by
    kubeadm as one, on a GPU worker advertising its `gpus`, with a kubelet at `kubelet_version` when
    given; then uncordon and label it. A node that joined at another version never counts as back:
    the rollout stops there, before a kubelet newer than its API servers joins anywhere else."""
    deadline = timing.clock() + timing.timeout_seconds
    steady: tuple[str, float] | None = None  # (boot id, since when) of an unbroken streak
    last = "it has not registered"
    while True:
        try:
            state = node_state(api, node)
        except NotYet as error:
            state, last = NodeState(found=False), f"the API server did not answer ({error})"
        else:
            last = _why_not_back(state, control_plane=control_plane, gpus=gpus, kubelet_version=kubelet_version)
        if last:
            steady = None
        elif steady is None or steady[0] != state.boot_id:
            steady = (state.boot_id, timing.clock())
        if steady is not None and timing.clock() - steady[1] >= STEADY_SECONDS:
            break
        if timing.clock() >= deadline:
            raise RolloutError(
                f"node {node} did not come back within {timing.timeout_seconds / 60:g} minutes ({last or 'not steady'}); "
                f"the rollout stops here, with the nodes after it untouched. Look at `kubectl describe node {node}` "
                "and the VM's console (the bootstrap logs to the journal: journalctl -u gpucluster-bootstrap), "
                "then run pulumi up again, or raise kubernetes.rolloutTimeoutMinutes"
            )
        timing.sleep(timing.poll_seconds)
    patch = {"metadata": {"labels": {GENERATION_LABEL: generation}}, "spec": {"unschedulable": False}}
    answer = api.request("PATCH", f"/api/v1/nodes/{quote(node)}", patch, patch=True)
    if answer.status != 200:
        raise RolloutError(f"uncordoning and labelling node {node}: HTTP {answer.status} {answer.message}".rstrip())


def _why_not_back(state: NodeState, *, control_plane: bool, gpus: int, kubelet_version: str = "") -> str:
    """ "" when the node is back, else what it still lacks (for the timeout's message)."""
    if not state.found:
        return "it has not registered"
    if kubelet_version and not runs_version(state, kubelet_version):
        return (
            f"its kubelet runs {state.kubelet_version or 'an unknown version'}, not v{kubelet_version.removeprefix('v')}: "
            "the new VM's kubeadm and kubelet packages are not at kubernetes.version (journalctl -u gpucluster-bootstrap)"
        )
    if not state.ready:
        return "it is not Ready"
    if control_plane and CONTROL_PLANE_LABEL not in state.labels:
        return "kubeadm has not marked it a control-plane node: its join has not finished"
    if state.gpus < gpus:
        return f"it advertises {state.gpus} of its {gpus} {GPU_RESOURCE}: the device plugin is not serving yet"
    return ""
