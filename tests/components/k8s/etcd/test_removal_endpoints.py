"""The removal goes on through the next member when the one asked is stopping.

Seen with the real etcd (tests/components/k8s/etcd/test_etcd_member.py, under load): cp-1 had just
removed itself, its process was still answering, and it answered cp-2's removal with HTTP 500
`raft: stopped` (etcd's raft.ErrStopped, which the gRPC gateway leaves as Unknown: 500). The old
code raised on any answer it did not expect, so `pulumi destroy` (and a rolling replacement that
asks a member which is going) failed although the next member would have done it.
"""

from __future__ import annotations

from typing import Any

from components.k8s.etcd.gateway import GatewayResponse, Member
from components.k8s.etcd.removal import _remove

TARGET = Member(id=2, name="cp-2", peer_urls=("https://10.0.0.2:2380",), client_urls=("https://10.0.0.2:2379",), is_learner=False)
STOPPING, SERVING = "https://10.0.0.1:2379", "https://10.0.0.3:2379"


class Stub:
    def __init__(self, answers: dict[str, GatewayResponse]) -> None:
        self.answers, self.asked = answers, []

    def post(self, endpoint: str, path: str, body: dict[str, Any]) -> GatewayResponse:
        self.asked.append(endpoint)
        return self.answers[endpoint]


def test_a_member_that_is_stopping_hands_the_removal_to_the_next() -> None:
    gateway = Stub({
        STOPPING: GatewayResponse(500, {"code": 2, "message": "raft: stopped"}),
        SERVING: GatewayResponse(200, {}),
    })
    removal, why = _remove(gateway, TARGET, [STOPPING, SERVING])  # type: ignore[arg-type]
    assert removal is not None and removal.outcome == "removed", why
    assert gateway.asked == [STOPPING, SERVING]


def test_when_every_member_is_stopping_it_waits_and_says_why() -> None:
    gateway = Stub({STOPPING: GatewayResponse(500, {"code": 2, "message": "raft: stopped"})})
    removal, why = _remove(gateway, TARGET, [STOPPING])  # type: ignore[arg-type]
    assert removal is None
    assert "raft: stopped" in why
