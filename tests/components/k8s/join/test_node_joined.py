"""NodeJoined: created only once the node of its VM has joined, which is when its first-boot secrets
may leave vCenter (GuestinfoScrub depends on it; issue 37 item 2). Against the Kubernetes API
double, over HTTP for the provider."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from components.k8s.join.joined import JoinWait, NodeJoinedProvider, NodeNotJoined, wait_until_joined
from components.k8s.rollout.steps import CONTROL_PLANE_LABEL
from tests.components.k8s.kube_double import KubeDouble, served


class Clock:
    """Fake time; `events` run when their time has come (the node registering, kubeadm labelling)."""

    def __init__(self, events: dict[float, Callable[[], None]] | None = None) -> None:
        self.t = 0.0
        self.events = dict(events or {})

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        for at in sorted(at for at in self.events if at <= self.t):
            self.events.pop(at)()


def _wait(clock: Clock, timeout: float = 600) -> JoinWait:
    return JoinWait(timeout_seconds=timeout, poll_seconds=5, clock=clock.now, sleep=clock.sleep)


def test_a_control_plane_node_has_joined_only_once_kubeadm_marked_it() -> None:
    kube = KubeDouble()
    clock = Clock(
        {
            60: lambda: kube.add_node("cp-2", ready=True),
            120: lambda: kube.nodes["cp-2"]["metadata"]["labels"].update({CONTROL_PLANE_LABEL: ""}),
        }
    )

    wait_until_joined(kube, "cp-2", control_plane=True, wait=_wait(clock))

    # Registered and Ready at 60 s was not enough: its etcd member had not joined yet.
    assert clock.t == 120


def test_a_worker_has_joined_once_ready() -> None:
    kube = KubeDouble()
    clock = Clock({30: lambda: kube.add_node("worker-1", ready=False), 90: lambda: kube.set_ready("worker-1", True)})

    wait_until_joined(kube, "worker-1", control_plane=False, wait=_wait(clock))

    assert clock.t == 90


def test_a_node_that_never_joins_fails_naming_it_and_what_to_do() -> None:
    kube = KubeDouble()
    kube.add_node("worker-2", ready=False)
    clock = Clock()

    with pytest.raises(
        NodeNotJoined, match=r"node worker-2 did not join within 10 minutes \(it is not Ready\)\. .*replace it"
    ):
        wait_until_joined(kube, "worker-2", control_plane=False, wait=_wait(clock))
    assert clock.t >= 600


def _props(kubeconfig: str, **overrides: Any) -> dict[str, Any]:
    return {
        "node_name": "master",
        "vm_id": "4211aaaa-0000-0000-0000-000000000001",
        "control_plane": True,
        "kubeconfig": kubeconfig,
        "timeout_seconds": 20,
        **overrides,
    }


def test_create_returns_only_once_the_node_joined() -> None:
    kube = KubeDouble()
    with served(kube) as kubeconfig:
        timer = threading.Timer(0.3, lambda: kube.add_node("master", ready=True, labels={CONTROL_PLANE_LABEL: ""}))
        timer.start()
        created = NodeJoinedProvider(poll_seconds=0.05).create(_props(kubeconfig))
        timer.join()

    assert ("GET", "/api/v1/nodes/master") in kube.calls
    assert created.id == "master@4211aaaa-0000-0000-0000-000000000001"
    assert created.outs == _props(kubeconfig)


def test_create_against_a_node_that_never_joins_fails() -> None:
    kube = KubeDouble()
    with served(kube) as kubeconfig, pytest.raises(NodeNotJoined, match="node master did not join"):
        NodeJoinedProvider(poll_seconds=0.05).create(_props(kubeconfig, timeout_seconds=0.3))


@pytest.mark.parametrize(
    ("change", "replaces"),
    [
        ({"vm_id": "4211bbbb-0000-0000-0000-000000000002"}, ["vm_id"]),  # a replaced VM waits again
        ({"node_name": "master-2"}, ["node_name"]),
        ({"timeout_seconds": 60}, []),
        ({}, []),
    ],
)
def test_a_new_vm_is_a_new_wait(change: dict[str, Any], replaces: list[str]) -> None:
    olds = _props("kubeconfig")
    diff = NodeJoinedProvider().diff("master@x", olds, {**olds, **change})
    assert (diff.changes, diff.replaces) == (bool(change), replaces)
