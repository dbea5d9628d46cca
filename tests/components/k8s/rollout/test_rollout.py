"""Rolling changes, the cluster side: when a replaced node counts as back, and whether a node still
has a change to finish. The order between nodes is Pulumi's (tests/program/test_day_two.py).

Against the Kubernetes API double (nodes with Ready conditions, boot ids, labels and allocatable
GPUs; merge-patch as the API server applies it); the world moves only when the code under test
sleeps, so each test says exactly what happens between two polls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from components.k8s.api.client import Response
from components.k8s.rollout.rollout import RolloutGateProvider, RolloutGenerationProvider, RolloutSettleProvider
from components.k8s.rollout.steps import (
    CONTROL_PLANE_LABEL,
    GENERATION_LABEL,
    GPU_RESOURCE,
    STEADY_SECONDS,
    RolloutError,
    Timing,
    change_pending,
    settle,
)
from tests.components.k8s.kube_double import KubeDouble, served

POLL = 5
STEADY_TICKS = int(STEADY_SECONDS / POLL)


class World:
    """The double plus a clock; `at(tick, action)` schedules what the cluster does meanwhile."""

    def __init__(self, kube: KubeDouble) -> None:
        self.kube, self.t = kube, 0.0
        self.events: dict[int, list[Callable[[], None]]] = {}

    def at(self, tick: int, action: Callable[[], None]) -> None:
        self.events.setdefault(tick, []).append(action)

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.kube.tick(seconds)
        for action in self.events.pop(self.kube.now, []):
            action()

    def timing(self, timeout: float = 1800) -> Timing:
        return Timing(timeout_seconds=timeout, poll_seconds=POLL, clock=lambda: self.t, sleep=self.sleep)


def cluster() -> KubeDouble:
    kube = KubeDouble()
    for node in ("cp-1", "worker-1", "worker-2"):
        kube.add_node(node, boot_id=f"{node}-boot-1")
    kube.nodes["cp-1"]["metadata"]["labels"][CONTROL_PLANE_LABEL] = ""
    return kube


def joins(kube: KubeDouble, node: str, *, gpus: int = 0, control_plane: bool = False) -> Callable[[], None]:
    """A new VM's kubelet registers the node again under the same name (its guard deleted the old)."""

    def action() -> None:
        kube.add_node(node, boot_id=f"{node}-boot-2", labels={CONTROL_PLANE_LABEL: ""} if control_plane else None)
        kube.nodes[node]["status"]["allocatable"] = {GPU_RESOURCE: str(gpus)}

    return action


def test_a_replaced_worker_is_back_once_ready_for_a_minute_with_its_gpus_then_labelled() -> None:
    kube = cluster()
    world = World(kube)
    del kube.nodes["worker-1"]  # its drain guard removed it before the VM went
    world.at(4, joins(kube, "worker-1", gpus=0))  # registered and Ready: the device plugin not yet
    world.at(7, lambda: kube.nodes["worker-1"]["status"]["allocatable"].update({GPU_RESOURCE: "1"}))
    settle(kube, "worker-1", "g2", control_plane=False, gpus=1, timing=world.timing())
    assert kube.now == 7 + STEADY_TICKS  # counted from the GPU's arrival, not from Ready
    node = kube.nodes["worker-1"]
    assert node["metadata"]["labels"][GENERATION_LABEL] == "g2" and node["spec"]["unschedulable"] is False


def test_a_control_plane_node_is_back_only_once_kubeadm_marked_it() -> None:
    kube = cluster()
    world = World(kube)
    del kube.nodes["cp-1"]
    world.at(2, joins(kube, "cp-1"))  # the kubelet registered: the etcd join still running
    world.at(5, lambda: kube.nodes["cp-1"]["metadata"]["labels"].update({CONTROL_PLANE_LABEL: ""}))
    settle(kube, "cp-1", "g2", control_plane=True, timing=world.timing())
    assert kube.now == 5 + STEADY_TICKS


def test_a_stale_ready_status_of_the_old_vm_is_not_taken_for_the_new_one() -> None:
    """Without a guard to delete the old Node (an existing cluster's control plane), it shows the
    deleted VM as Ready until the node controller marks it Unknown (40 to 50 s)."""
    kube = cluster()
    world = World(kube)
    world.at(9, lambda: kube.set_ready("worker-2", False))  # ~45 s: Unknown
    world.at(20, joins(kube, "worker-2"))
    settle(kube, "worker-2", "g2", control_plane=False, timing=world.timing())
    assert kube.now == 20 + STEADY_TICKS


def test_an_api_server_that_does_not_answer_for_a_while_is_waited_out() -> None:
    """A single control plane being replaced, or a member of several: refused connections and 5xx."""
    kube = cluster()
    world = World(kube)
    answers = iter([OSError("connection refused"), 503, 503, 500, OSError("timed out")])

    class Flaky:
        def request(
            self, method: str, path: str, body: dict[str, Any] | None = None, *, patch: bool = False
        ) -> Response:
            failure = next(answers, None)
            if isinstance(failure, OSError):
                raise failure
            if failure is not None:
                return Response(failure, {"message": "etcdserver: leader changed"})
            return kube.request(method, path, body, patch=patch)

    settle(Flaky(), "worker-1", "g2", control_plane=False, timing=world.timing())
    assert kube.now == 5 + STEADY_TICKS  # five polls without an answer, then a minute of Ready


def test_a_node_that_does_not_come_back_stops_the_rollout_saying_what_it_lacks() -> None:
    kube = cluster()
    world = World(kube)
    del kube.nodes["cp-1"]
    world.at(2, joins(kube, "cp-1"))
    with pytest.raises(RolloutError) as error:
        settle(kube, "cp-1", "g2", control_plane=True, timing=world.timing(timeout=600))
    message = str(error.value)
    assert "within 10 minutes" in message and "its join has not finished" in message
    assert "nodes after it untouched" in message and "kubernetes.rolloutTimeoutMinutes" in message
    assert GENERATION_LABEL not in kube.nodes["cp-1"]["metadata"]["labels"]


def test_a_change_is_pending_until_the_node_carries_its_generation() -> None:
    kube = cluster()
    assert change_pending(kube, "worker-1", "g2")  # never labelled (day one's nodes are not)
    kube.nodes["worker-1"]["metadata"]["labels"][GENERATION_LABEL] = "g1"
    assert change_pending(kube, "worker-1", "g2")
    kube.nodes["worker-1"]["metadata"]["labels"][GENERATION_LABEL] = "g2"
    assert not change_pending(kube, "worker-1", "g2")
    assert change_pending(kube, "worker-9", "g2")  # not registered (yet, or any more)

    class Down:
        def request(self, *args: Any, **kwargs: Any) -> Response:
            raise OSError("connection refused")

    assert change_pending(Down(), "worker-1", "g2")  # the safe side: the next node waits


# --- the providers ------------------------------------------------------------------------------------


def test_day_one_creates_wait_for_nothing_and_call_nothing() -> None:
    generation = RolloutGenerationProvider().create({"node_name": "w", "generation": "g1", "kubeconfig": "x"})
    assert generation.outs["pending"] is False  # no dependency on the previous node: VMs in parallel
    gate = RolloutGateProvider().create({"node_name": "w", "generation": "g1", "previous_node": "v"})
    assert gate.id == "w@g1"
    props = {"node_name": "w", "generation": "g1", "vm_id": "vm-1", "control_plane": False, "gpus": 1,
             "kubeconfig": "x", "timeout_seconds": 60}  # fmt: skip
    assert RolloutSettleProvider().create(props).outs == props


def test_the_generation_is_pending_from_a_change_until_the_node_is_labelled() -> None:
    kube = cluster()
    provider = RolloutGenerationProvider()
    with served(kube) as kubeconfig:
        state = provider.create({"node_name": "worker-1", "generation": "g1", "kubeconfig": kubeconfig}).outs
        news = {**state, "generation": "g2"}
        assert provider.diff("worker-1", state, news).changes and not provider.diff("worker-1", state, news).replaces
        state = provider.update("worker-1", state, news).outs or {}
        assert state["pending"] is True
        # The run failed before the node was back: the next run looks again, still pending.
        assert provider.diff("worker-1", state, dict(state)).changes
        assert (provider.update("worker-1", state, dict(state)).outs or {})["pending"] is True
        kube.nodes["worker-1"]["metadata"]["labels"][GENERATION_LABEL] = "g2"  # its settle finished
        state = provider.update("worker-1", state, dict(state)).outs or {}
        assert state["pending"] is False
        assert not provider.diff("worker-1", state, dict(state)).changes  # and then it stays quiet


def test_the_gate_is_replaced_delete_first_on_a_new_generation_only() -> None:
    gate = RolloutGateProvider()
    olds = {"node_name": "w", "generation": "g1", "previous_node": "v"}
    replaced = gate.diff("w", olds, {**olds, "generation": "g2"})
    assert replaced.replaces == ["generation"] and replaced.delete_before_replace
    moved = gate.diff("w", olds, {**olds, "previous_node": "u"})  # scale in before it
    assert moved.changes and not moved.replaces
    assert not gate.diff("w", olds, dict(olds)).changes


def test_the_settle_waits_only_for_a_new_vm_or_generation_and_updates_rather_than_replaces() -> None:
    provider = RolloutSettleProvider()
    olds = {"node_name": "w", "generation": "g1", "vm_id": "vm-1", "control_plane": False, "gpus": 1,
            "kubeconfig": "not a kubeconfig: any API call would fail", "timeout_seconds": 60}  # fmt: skip
    moved = provider.diff("w", olds, {**olds, "vm_id": "vm-2"})
    assert moved.changes and not moved.replaces  # a create would not wait
    assert provider.update("w", olds, {**olds, "timeout_seconds": 120}).outs is not None  # no call made


# --- a Kubernetes version change rolls the nodes too -----------------------------------------------


def kubelet(kube: Any, node: str, version: str) -> Callable[[], None]:
    return lambda: kube.nodes[node]["status"]["nodeInfo"].update({"kubeletVersion": version})


def test_a_node_is_back_only_with_its_kubelet_at_the_new_version() -> None:
    """A new VM whose template kubelet was not brought to kubernetes.version never counts as back:
    the rollout stops at it, before any later node (a worker with a kubelet newer than the API
    servers) is replaced."""
    kube = cluster()
    world = World(kube)
    del kube.nodes["cp-1"]
    world.at(2, joins(kube, "cp-1", control_plane=True))
    world.at(3, kubelet(kube, "cp-1", "v1.34.2"))
    with pytest.raises(RolloutError) as error:
        settle(kube, "cp-1", "g1", control_plane=True, kubelet_version="1.35.0", timing=world.timing(timeout=600))
    assert "its kubelet runs v1.34.2, not v1.35.0" in str(error.value)
    assert GENERATION_LABEL not in kube.nodes["cp-1"]["metadata"]["labels"]

    kube = cluster()
    world = World(kube)
    del kube.nodes["cp-1"]
    world.at(2, joins(kube, "cp-1", control_plane=True))
    world.at(4, kubelet(kube, "cp-1", "v1.35.0"))
    settle(kube, "cp-1", "g1", control_plane=True, kubelet_version="1.35.0", timing=world.timing())
    assert kube.now == 4 + STEADY_TICKS


def test_a_version_change_is_pending_until_the_kubelet_runs_it() -> None:
    kube = cluster()
    kube.nodes["worker-1"]["metadata"]["labels"][GENERATION_LABEL] = "g1"
    kubelet(kube, "worker-1", "v1.34.2")()
    assert not change_pending(kube, "worker-1", "g1", "1.34.2")
    assert change_pending(kube, "worker-1", "g1", "1.35.0")  # same generation, new version


def test_a_new_version_replaces_the_gate_but_the_first_run_with_versions_rolls_no_node_at_it() -> None:
    gate = RolloutGateProvider()
    olds = {"node_name": "w", "generation": "g1", "kubernetes_version": "1.34.2", "previous_node": "v"}
    upgraded = gate.diff("w", olds, {**olds, "kubernetes_version": "1.35.0"})
    assert upgraded.replaces == ["kubernetes_version"] and upgraded.delete_before_replace
    # State written before gates carried the version, the node at it: recorded in place, no node replaced.
    kube = cluster()
    kube.add_node("w")
    kubelet(kube, "w", "v1.34.2")()
    legacy = {k: v for k, v in olds.items() if k != "kubernetes_version"}
    with served(kube) as kubeconfig:
        recorded = gate.diff("w", legacy, {**olds, "kubeconfig": kubeconfig})
    assert recorded.changes and not recorded.replaces
    generation = RolloutGenerationProvider()
    assert generation.diff("w", {"generation": "g1", "kubernetes_version": "1.34.2"},
                           {"generation": "g1", "kubernetes_version": "1.35.0"}).changes  # fmt: skip


def test_a_gate_recorded_before_versions_rolls_its_node_when_the_kubelet_is_not_at_the_stacks_version() -> None:
    """The first run after gates carried the version, with `kubernetes.version` edited in the same
    run: adopting the version in place would replace no node while the stack says 1.35.0 and the
    cluster stays 1.34.2. The node's kubelet decides (kubeadm-config is already at the new version
    when the gate is registered: the cluster step comes first)."""
    kube = cluster()
    kubelet(kube, "worker-1", "v1.34.2")()
    legacy = {"node_name": "worker-1", "generation": "g1", "previous_node": "v"}
    gate = RolloutGateProvider()
    with served(kube) as kubeconfig:
        news = {**legacy, "kubernetes_version": "1.35.0", "kubeconfig": kubeconfig}
        rolled = gate.diff("worker-1", legacy, news)
        assert rolled.replaces == ["kubernetes_version"] and rolled.delete_before_replace
        kubelet(kube, "worker-1", "v1.35.0")()  # already there (upgraded by hand): recorded in place
        recorded = gate.diff("worker-1", legacy, news)
        assert recorded.changes and not recorded.replaces
    # The cluster does not answer: refused, naming the node, rather than guessed either way.
    with pytest.raises(RolloutError, match="worker-1") as refused:
        gate.diff("worker-1", legacy, news)
    assert "kubernetes.version" in str(refused.value)
