"""Scale in: a worker's node is drained and removed before its VM goes, honouring disruption budgets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from components.k8s.api.client import KubeApi
from components.k8s.rollout.drain import DrainError, NodeDrainProvider, drain_node
from tests.components.k8s.kube_double import PDB_REFUSAL, KubeDouble
from tests.components.k8s.kube_double import served as serve_kube


def world() -> KubeDouble:
    """Three workers; `worker-3` runs a DaemonSet pod, a static pod and two replicas of `web`."""
    kube = KubeDouble()
    for node in ("worker-1", "worker-2", "worker-3"):
        kube.add_node(node)
    kube.add_pod("kube-system", "calico-node-x", "worker-3", owner="DaemonSet/calico-node")
    kube.add_pod("kube-system", "static-x", "worker-3")
    kube.pods["kube-system/static-x"]["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    for i in (1, 2):
        kube.add_pod("apps", f"web-{i}", "worker-3", labels={"app": "web"}, owner="ReplicaSet/web")
    kube.add_pod("apps", "web-3", "worker-1", labels={"app": "web"}, owner="ReplicaSet/web")
    return kube


class Clock:
    def __init__(self, kube: KubeDouble) -> None:
        self.kube, self.t = kube, 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.kube.tick(seconds)


def drain(kube: KubeDouble, node: str = "worker-3", timeout: float = 60) -> Any:
    clock = Clock(kube)
    return drain_node(kube, node, timeout_seconds=timeout, poll_seconds=5, clock=clock.now, sleep=clock.sleep)


def test_without_a_budget_every_pod_but_daemonset_and_static_ones_is_evicted_then_the_node_deleted() -> None:
    kube = world()
    result = drain(kube)
    assert result.node_found
    assert sorted(result.evicted) == ["apps/web-1", "apps/web-2"]
    assert result.left == ["kube-system/calico-node-x", "kube-system/static-x"]
    assert "worker-3" not in kube.nodes
    methods = [m for m, p in kube.calls if "/nodes/worker-3" in p]
    assert methods[:2] == ["GET", "PATCH"] and methods[-1] == "DELETE"  # cordoned first, deleted last
    # The replacements landed on schedulable nodes only: the cordon kept them off worker-3.
    assert all(p["spec"]["nodeName"] != "worker-3" for k, p in kube.pods.items() if k.startswith("apps/web-r"))


def test_a_budget_at_its_floor_lets_one_pod_go_at_a_time() -> None:
    kube = world()
    kube.add_pdb("apps", "web", {"app": "web"}, min_available=2)  # 3 healthy: one disruption at a time
    most_down = 0

    class Watching(Clock):
        def sleep(self, seconds: float) -> None:
            nonlocal most_down
            super().sleep(seconds)
            web = [p for p in kube.pods.values() if p["metadata"]["labels"].get("app") == "web"]
            most_down = max(most_down, 3 - sum(1 for p in web if kube._healthy(p)))

    clock = Watching(kube)
    result = drain_node(kube, "worker-3", timeout_seconds=120, poll_seconds=5, clock=clock.now, sleep=clock.sleep)
    assert sorted(result.evicted) == ["apps/web-1", "apps/web-2"]
    assert kube.refusals >= 1  # the second eviction waited for the first pod's replacement
    assert most_down <= 1  # the budget held throughout
    assert "worker-3" not in kube.nodes


def test_a_budget_that_never_allows_an_eviction_fails_and_keeps_the_node() -> None:
    kube = world()
    kube.add_pdb("apps", "web", {"app": "web"}, min_available=3)  # never a disruption
    with pytest.raises(DrainError) as refused:
        drain(kube, timeout=30)
    message = str(refused.value)
    assert "node worker-3 was not drained within 0.5 minutes" in message
    assert "apps/web-1" in message and "apps/web-2" in message
    assert PDB_REFUSAL in message
    assert "kubernetes.drainTimeoutMinutes" in message
    assert kube.nodes["worker-3"]["spec"]["unschedulable"] is True  # cordoned, not deleted
    assert not any(m == "DELETE" for m, _ in kube.calls)


def test_two_budgets_on_one_pod_is_the_api_servers_error_not_a_hang() -> None:
    kube = world()
    kube.add_pdb("apps", "web-a", {"app": "web"}, min_available=0)
    kube.add_pdb("apps", "web-b", {"app": "web"}, min_available=0)
    with pytest.raises(DrainError, match="more than one PodDisruptionBudget"):
        drain(kube)


def test_a_node_that_is_already_gone_is_done() -> None:
    kube = world()
    result = drain(kube, node="worker-9")
    assert not result.node_found
    assert kube.calls == [("GET", "/api/v1/nodes/worker-9")]


# --- the HTTP client, against the double served on loopback ---------------------------------------


@pytest.fixture
def served() -> Iterator[tuple[KubeDouble, str]]:
    kube = world()
    with serve_kube(kube) as kubeconfig:
        yield kube, kubeconfig


def test_the_client_drains_over_http(served: tuple[KubeDouble, str]) -> None:
    kube, kubeconfig = served
    result = drain_node(KubeApi(kubeconfig), "worker-3", timeout_seconds=60, poll_seconds=0.01, sleep=kube.tick)
    assert sorted(result.evicted) == ["apps/web-1", "apps/web-2"]
    assert "worker-3" not in kube.nodes


def test_the_provider_drains_on_delete_and_does_nothing_on_create(served: tuple[KubeDouble, str]) -> None:
    kube, kubeconfig = served
    provider = NodeDrainProvider()
    props = {"node_name": "worker-2", "vm_id": "vm-2", "kubeconfig": kubeconfig, "timeout_seconds": 30}
    created = provider.create(props)
    assert created.id == "worker-2" and kube.calls == []
    provider.delete("worker-2", created.outs)
    assert "worker-2" not in kube.nodes


def test_a_new_vm_replaces_the_guard_delete_first() -> None:
    provider = NodeDrainProvider()
    olds = {"node_name": "w", "vm_id": "vm-1", "kubeconfig": "a", "timeout_seconds": 60}
    replaced = provider.diff("w", olds, {**olds, "vm_id": "vm-2"})
    assert replaced.replaces == ["vm_id"] and replaced.delete_before_replace
    updated = provider.diff("w", olds, {**olds, "timeout_seconds": 120})
    assert updated.changes and not updated.replaces
    assert not provider.diff("w", olds, dict(olds)).changes
