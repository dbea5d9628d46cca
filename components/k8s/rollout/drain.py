"""NodeDrain: a GPU worker leaves the cluster before its VM is destroyed.

One NodeDrain per worker, depending on the worker's VM (its id is an input) and on the API
server's readiness. Pulumi deletes dependents before what they depend on, so removing a worker from
the stack file (scale in), or replacing its VM delete-first, runs this resource's `delete` first:

1. cordon the node (`spec.unschedulable`), as `kubectl drain` does;
2. evict every pod on it through the Eviction API (policy/v1), which honours PodDisruptionBudgets:
   an eviction that would break a budget is refused with 429 and retried every `poll_seconds`, as
   `kubectl drain` retries every 5 s; DaemonSet pods and static (mirror) pods are left, as
   `kubectl drain --ignore-daemonsets` leaves them (the VM's end takes them);
3. wait until the evicted pods are gone, then delete the Node object.

Bounded by `timeout_seconds` (the stack key `kubernetes.drainTimeoutMinutes`): when a budget never
allows the eviction, the delete fails naming the pods and the API server's reason, the VM is not
touched (its delete never starts), and the node stays cordoned; fix the budget or scale the
workload, then run `pulumi up` again. Nothing is forced: a drain that cannot finish is an error.

`create` does nothing (the node joins later, on its own); `read` reports its inputs (the guard has
no state of its own in the cluster); changing the node name or VM replaces it; the kubeconfig
(a secret input, encrypted in state) and the timeout update in place.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pulumi

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.k8s.api.client import KubeApi, Response, quote

DEFAULT_TIMEOUT_SECONDS = 15 * 60
POLL_SECONDS = 5.0
"""Between eviction retries and pod checks (kubectl drain retries a refused eviction after 5 s)."""
_SKIPPED_PHASES = ("Succeeded", "Failed")


class Api(Protocol):
    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, patch: bool = False
    ) -> Response: ...


class DrainError(Exception):
    """The node could not be drained in time, or the API server refused something else."""


@dataclass
class DrainResult:
    node_found: bool
    evicted: list[str] = field(default_factory=list)
    """`namespace/name` of every pod evicted, in order."""
    left: list[str] = field(default_factory=list)
    """DaemonSet and static pods left on the node (the VM's end takes them)."""


def _pod_key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata", {})
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _left_alone(pod: dict[str, Any]) -> bool:
    meta = pod.get("metadata", {})
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return True
    return any(owner.get("kind") == "DaemonSet" for owner in meta.get("ownerReferences") or [])


def _check(response: Response, what: str, *, allowed: tuple[int, ...] = (200,)) -> Response:
    if response.status not in allowed:
        raise DrainError(f"{what}: HTTP {response.status} {response.message}".rstrip())
    return response


def drain_node(
    api: Api,
    node: str,
    *,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    poll_seconds: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainResult:
    """Cordon, evict (honouring disruption budgets), wait, delete the Node. See the module docstring."""
    node_path = f"/api/v1/nodes/{quote(node)}"
    found = api.request("GET", node_path)
    if found.status == 404:
        return DrainResult(node_found=False)
    _check(found, f"reading node {node}")
    _check(api.request("PATCH", node_path, {"spec": {"unschedulable": True}}, patch=True), f"cordoning node {node}")
    result = DrainResult(node_found=True)
    deadline = clock() + timeout_seconds
    pods_path = "/api/v1/pods?fieldSelector=" + quote(f"spec.nodeName={node}")
    refused: dict[str, str] = {}
    while True:
        pods = _check(api.request("GET", pods_path), f"listing the pods of node {node}").body.get("items", [])
        active = [p for p in pods if (p.get("status") or {}).get("phase") not in _SKIPPED_PHASES]
        result.left = sorted(_pod_key(p) for p in active if _left_alone(p))
        movable = [p for p in active if not _left_alone(p)]
        if not movable:
            break
        for pod in movable:
            if pod["metadata"].get("deletionTimestamp"):
                continue  # evicted already: terminating, wait for it to go
            key = _pod_key(pod)
            namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            answer = api.request(
                "POST",
                f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/eviction",
                {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}},
            )
            if answer.status in (200, 201):
                result.evicted.append(key)
                refused.pop(key, None)
            elif answer.status == 429:  # a PodDisruptionBudget says not now
                refused[key] = answer.message
            elif answer.status != 404:  # 404: gone meanwhile
                _check(answer, f"evicting {key} from node {node}")
        if clock() >= deadline:
            waiting = [_pod_key(p) for p in movable]
            reasons = "; ".join(f"{key}: {refused[key]}" for key in waiting if key in refused)
            raise DrainError(
                f"node {node} was not drained within {timeout_seconds / 60:g} minutes; still on it: "
                f"{', '.join(waiting)}" + (f" (eviction refused: {reasons})" if reasons else "") + ". "
                "The node stays cordoned and its VM was not deleted: relax the PodDisruptionBudget or "
                "scale the workload elsewhere, or raise kubernetes.drainTimeoutMinutes, then run pulumi up again"
            )
        sleep(poll_seconds)
    _check(api.request("DELETE", node_path), f"deleting node {node}", allowed=(200, 202, 404))
    return result


def _outputs(props: dict[str, Any]) -> dict[str, Any]:
    return {
        "node_name": str(props["node_name"]),
        "vm_id": str(props["vm_id"]),
        "kubeconfig": props["kubeconfig"],
        "timeout_seconds": float(props["timeout_seconds"]),
    }


class NodeGuardProvider(handlers.ResourceHandlers):
    """What a node's guard provider does besides its `delete`: `create` records, `read` reports its
    inputs (a guard has no state of its own in the cluster), a new node name or VM replaces it
    delete-first (the old node is drained before the old VM goes), anything else updates it."""

    replacing: tuple[str, ...] = ("node_name", "vm_id")
    updating: tuple[str, ...] = ()

    def outputs(self, props: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        outs = self.outputs(props)
        return handlers.CreateResult(id_=outs["node_name"], outs=outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        replaces = [key for key in self.replacing if olds.get(key) != news.get(key)]
        updates = [key for key in self.updating if olds.get(key) != news.get(key)]
        return handlers.DiffResult(changes=bool(replaces or updates), replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        return handlers.UpdateResult(outs=self.outputs(news))

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        return handlers.ReadResult(id_=id_, outs=self.outputs(props) if props else props)


class NodeDrainProvider(NodeGuardProvider):
    """Create records; delete drains (see the module docstring)."""

    updating = ("kubeconfig", "timeout_seconds")

    def outputs(self, props: dict[str, Any]) -> dict[str, Any]:
        return _outputs(props)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        node, timeout = str(props.get("node_name") or id_), float(props["timeout_seconds"])
        try:
            drained = drain_node(KubeApi(str(props["kubeconfig"])), node, timeout_seconds=timeout)
        except OSError as error:
            raise DrainError(
                f"node {node}: the API server cannot be reached to drain it ({error}); the VM was not deleted. "
                "If the cluster is gone for good, remove this guard from the state with `pulumi state delete` "
                "and run pulumi up again"
            ) from None
        if drained.node_found:
            pulumi.log.info(
                f"node {node}: drained ({len(drained.evicted)} pod(s) evicted) and removed from the cluster"
            )


@dataclass(frozen=True, kw_only=True)
class NodeDrainArgs:
    node_name: str
    """The Kubernetes node name (the guest's hostname: our node name)."""
    vm_id: pulumi.Input[str]
    """The node's VM: the drain runs before that VM is deleted or replaced."""
    kubeconfig: pulumi.Input[str]
    """Admin kubeconfig (a secret; encrypted in state) used by `delete`."""
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    """How long evictions may be refused before the removal fails. Default 900 (15 minutes): long
    enough for a workload to reschedule pod by pod, short enough to notice a budget that never
    allows an eviction. Stack key `kubernetes.drainTimeoutMinutes`."""

    def __post_init__(self) -> None:
        if self.timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be positive, got {self.timeout_seconds}")


class NodeDrain(GpuclusterResource, module="kubernetes", name="NodeDrain"):
    """Drains and removes a worker's Node before its VM goes; pass the API readiness as `depends_on`."""

    node_name: pulumi.Output[str]

    def __init__(self, name: str, args: NodeDrainArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            name,
            {
                "node_name": args.node_name,
                "vm_id": args.vm_id,
                "kubeconfig": pulumi.Output.secret(args.kubeconfig),
                "timeout_seconds": args.timeout_seconds,
            },
            opts,
        )
