"""A control-plane node leaves etcd through another member before its VM goes, never at quorum's cost.

Against a REAL etcd cluster (`etcd_real`): three `etcd` processes on loopback with kubeadm's TLS
flags, our own `remove_etcd_member` and `EtcdGateway` doing the work, `etcdctl` checking the result.
The packaged etcd is 3.4: it serves the gateway under `/v3/` (and the deprecated `/v3beta/`; 3.5
dropped `/v3beta/`, etcd CHANGELOG-3.5 "gRPC gateway only supports /v3 endpoint"), so the paths our
code uses (`/v3/...`) are served by 3.4 and by kubeadm's 3.5 alike.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.k8s.etcd.gateway import MEMBER_REMOVE, MEMBER_STATUS, GatewayResponse
from components.k8s.etcd.removal import EtcdMemberError, Removal, remove_etcd_member
from tests.components.k8s.etcd.etcd_pki import EtcdPki, make_etcd_pki
from tests.components.k8s.etcd.etcd_real import ClusterPool, RealEtcd, RecordingGateway, real_etcd, require_etcd

ALARM = "/v3/maintenance/alarm"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> EtcdPki:
    require_etcd()
    return make_etcd_pki(Path(tmp_path_factory.mktemp("etcd-pki")))


@pytest.fixture(scope="module")
def pool(pki: EtcdPki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterPool]:
    clusters = ClusterPool(pki, lambda: Path(tmp_path_factory.mktemp("etcd")), ["cp-1", "cp-2", "cp-3"])
    yield clusters
    clusters.close()


@pytest.fixture
def etcd(pool: ClusterPool) -> Iterator[RealEtcd]:
    """A fresh three-member cluster, all voters, that has run through etcd's health window."""
    cluster = pool.take()
    yield cluster
    cluster.close()


def gateway(pki: EtcdPki) -> RecordingGateway:
    return RecordingGateway(pki.ca_pem, pki.client_cert_pem, pki.client_key_pem, timeout=5)


class Clock:
    """Fake time; `events[n]` runs at the n-th sleep (a member coming back, say). `real` seconds of
    real sleep per poll let etcd's own timers (its 5 s health window) run."""

    def __init__(self, events: dict[int, Any] | None = None, real: float = 0.0) -> None:
        self.t, self.sleeps, self.events, self.real = 0.0, 0, events or {}, real

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.sleeps += 1
        if self.sleeps in self.events:
            self.events[self.sleeps]()
        if self.real:
            time.sleep(self.real)


def remove(
    etcd: RealEtcd,
    gw: RecordingGateway,
    node: str = "cp-3",
    *,
    clock: Clock | None = None,
    timeout: float = 60,
    others: list[str] | None = None,
) -> Removal:
    clock = clock or Clock()
    if others is None:
        others = [n for n in ("cp-1", "cp-2", "cp-3") if n != node]
    return remove_etcd_member(
        gw,
        node_name=node,
        node_address=etcd.addresses[node],
        other_endpoints=[etcd.endpoint(n) for n in others],
        client_port=etcd.port,
        timeout_seconds=timeout,
        poll_seconds=5,
        clock=clock.now,
        sleep=clock.sleep,
    )


def removals(gw: RecordingGateway) -> list[tuple[str, str, dict[str, Any]]]:
    return [call for call in gw.calls if call[1] == MEMBER_REMOVE]


def test_a_healthy_members_removal_goes_through_another_member(etcd: RealEtcd, pki: EtcdPki) -> None:
    ids, gw = etcd.members(), gateway(pki)
    result = remove(etcd, gw)
    assert result.outcome == "removed" and result.member is not None and result.member.id == ids["cp-3"]
    assert result.member.name == "cp-3" and result.via == etcd.endpoint("cp-1")
    assert set(etcd.members()) == {"cp-1", "cp-2"}
    # Through cp-1, with the ID as the gateway's uint64 string; cp-3 itself was never asked to remove.
    assert removals(gw) == [(etcd.endpoint("cp-1"), MEMBER_REMOVE, {"ID": str(ids["cp-3"])})]
    # Both remaining voters were asked for their status, each on its own endpoint.
    statuses = {endpoint for endpoint, path, _ in gw.calls if path == MEMBER_STATUS}
    assert statuses == {etcd.endpoint("cp-1"), etcd.endpoint("cp-2")}


def test_the_removal_that_would_lose_quorum_is_refused_and_the_member_stays(etcd: RealEtcd, pki: EtcdPki) -> None:
    ids, gw = etcd.members(), gateway(pki)
    etcd.stop("cp-2")  # 3 members, one down: removing a healthy one leaves 1 of 2
    with pytest.raises(EtcdMemberError) as refused:
        remove(etcd, gw, timeout=30)
    message = str(refused.value)
    assert f"etcd member cp-3 ({ids['cp-3']:x}) of node cp-3 was not removed within 0.5 minutes" in message
    assert "1 healthy of 2 voting members, fewer than the 2 a quorum needs" in message
    assert f"cp-2 ({ids['cp-2']:x}): unreachable" in message
    assert "kubernetes.drainTimeoutMinutes" in message and "VM was not deleted" in message
    assert "cp-3" in etcd.members() and removals(gw) == []


def test_etcds_own_check_agrees_so_the_guard_is_not_what_keeps_quorum_alone(etcd: RealEtcd, pki: EtcdPki) -> None:
    """Asked directly, etcd refuses the same removal (`--strict-reconfig-check`, `mayRemoveMember`)."""
    ids = etcd.members()
    etcd.stop("cp-2")
    answer = gateway(pki).post(etcd.endpoint("cp-1"), MEMBER_REMOVE, {"ID": str(ids["cp-3"])})
    assert (answer.status, answer.message) == (503, "etcdserver: unhealthy cluster")
    assert "cp-3" in etcd.members()


def test_a_member_that_recovers_within_the_timeout_lets_the_removal_through(etcd: RealEtcd, pki: EtcdPki) -> None:
    """etcd counts a restarted peer towards quorum only once it has been connected for 5 s
    (etcdserver `HealthInterval`), answering 503 "unhealthy cluster" meanwhile: the guard retries."""
    etcd.stop("cp-2")
    clock = Clock({2: lambda: etcd.start("cp-2")}, real=1.0)
    assert remove(etcd, gateway(pki), clock=clock, timeout=150).outcome == "removed"
    assert clock.sleeps >= 2 and set(etcd.members()) == {"cp-1", "cp-2"}


def test_an_alarm_makes_the_members_unhealthy(etcd: RealEtcd, pki: EtcdPki) -> None:
    """etcd's alarms are cluster state (raft-applied), so every member's status lists them, as
    `memberID:<id> alarm:NOSPACE ` (the AlarmMember's text form; etcd v3rpc/maintenance.go `Status`)."""
    ids, gw = etcd.members(), gateway(pki)
    raised = gw.post(
        etcd.endpoint("cp-2"), ALARM, {"action": "ACTIVATE", "memberID": str(ids["cp-2"]), "alarm": "NOSPACE"}
    )
    assert raised.status == 200, raised
    with pytest.raises(EtcdMemberError) as refused:
        remove(etcd, gw, timeout=10)
    message = str(refused.value)
    for member in ("cp-1", "cp-2"):
        assert f"{member} ({ids[member]:x}): alarm: memberID:{ids['cp-2']} alarm:NOSPACE" in message
    assert "cp-3" in etcd.members()


def test_a_member_without_a_leader_is_unhealthy(etcd: RealEtcd, pki: EtcdPki) -> None:
    """Two of three down: the survivor still answers, without a leader; nothing is removed."""
    gw = gateway(pki)
    etcd.stop("cp-1")
    etcd.stop("cp-2", seen=False)  # cp-3 alone: its leader goes once its election timeout passes
    etcd.wait_leaderless("cp-3")
    with pytest.raises(EtcdMemberError) as refused:
        remove(etcd, gw, "cp-1", timeout=10, others=["cp-2", "cp-3"])
    assert "cp-3 (" in str(refused.value) and "has no leader" in str(refused.value)
    assert removals(gw) == []


def test_the_nodes_own_dead_member_is_removed_when_the_others_are_healthy(etcd: RealEtcd, pki: EtcdPki) -> None:
    etcd.stop("cp-3")  # the VM being replaced had already crashed
    assert remove(etcd, gateway(pki)).outcome == "removed"
    assert set(etcd.members()) == {"cp-1", "cp-2"}


def test_a_member_already_gone_is_success_and_nothing_is_removed(etcd: RealEtcd, pki: EtcdPki) -> None:
    remove(etcd, gateway(pki))
    again = gateway(pki)
    assert remove(etcd, again).outcome == "absent"  # the delete cut after the removal, run again
    assert removals(again) == []


def test_a_member_removed_between_list_and_remove_is_success(etcd: RealEtcd, pki: EtcdPki) -> None:
    class Racing(RecordingGateway):
        def post(self, endpoint: str, path: str, body: dict[str, Any]) -> GatewayResponse:
            if path == MEMBER_REMOVE:  # someone else (an operator, a previous run) got there first
                super().post(endpoint, path, body)
            return super().post(endpoint, path, body)

    racing = Racing(pki.ca_pem, pki.client_cert_pem, pki.client_key_pem)
    assert remove(etcd, racing).outcome == "absent"  # etcd's 404 "member not found"
    assert set(etcd.members()) == {"cp-1", "cp-2"}


def test_the_last_member_is_never_removed(pki: EtcdPki, tmp_path: Path) -> None:
    with real_etcd(pki, tmp_path, ["cp-1"], settled=False) as etcd:  # no peers: no health window
        gw = gateway(pki)
        result = remove(etcd, gw, "cp-1", others=[])
        assert result.outcome == "last-member" and set(etcd.members()) == {"cp-1"}
        assert removals(gw) == []


def test_destroy_the_last_member_learns_it_is_last_from_itself(etcd: RealEtcd, pki: EtcdPki) -> None:
    """`pulumi destroy`: cp-1 and cp-2 left first; their etcds are gone, cp-3's guard still finishes."""
    assert remove(etcd, gateway(pki), "cp-1").outcome == "removed"
    assert remove(etcd, gateway(pki), "cp-2").outcome == "removed"
    assert remove(etcd, gateway(pki), "cp-3").outcome == "last-member"
    assert set(etcd.members("cp-3")) == {"cp-3"}


def test_a_joining_learner_is_removed_without_a_quorum_check(etcd: RealEtcd, pki: EtcdPki) -> None:
    etcd.add_learner("cp-4", start=True)
    etcd.stop("cp-2")
    assert remove(etcd, gateway(pki), "cp-4").outcome == "removed"
    assert set(etcd.members()) == {"cp-1", "cp-2", "cp-3"}


def test_an_unstarted_member_is_found_by_its_peer_url(etcd: RealEtcd, pki: EtcdPki) -> None:
    """kubeadm added cp-4 (no name until its etcd starts), and the VM died before it started."""
    learner = etcd.add_learner("cp-4", start=False)
    result = remove(etcd, gateway(pki), "cp-4")
    assert result.outcome == "removed" and result.member is not None
    assert (result.member.id, result.member.name, result.member.client_urls) == (learner, "", ())
    assert "cp-4" not in etcd.members()


def test_a_client_certificate_from_another_ca_is_refused(etcd: RealEtcd, pki: EtcdPki) -> None:
    outsider = RecordingGateway(pki.ca_pem, pki.outsider_cert_pem, pki.outsider_key_pem, timeout=5)
    with pytest.raises(EtcdMemberError, match="no etcd endpoint answered the member list"):
        remove(etcd, outsider)
    assert "cp-3" in etcd.members()


def test_a_bad_id_is_a_400_and_an_unknown_one_a_404(etcd: RealEtcd, pki: EtcdPki) -> None:
    """What grpc-gateway makes of etcd's errors: the HTTP status of the gRPC code, `{error, code, message}`."""
    answer = gateway(pki).post(etcd.endpoint("cp-1"), MEMBER_REMOVE, {"ID": "not-a-number"})
    assert (answer.status, answer.body["code"]) == (400, 3)  # InvalidArgument
    missing = gateway(pki).post(etcd.endpoint("cp-1"), MEMBER_REMOVE, {"ID": str(0xFD422379FDA50E48)})
    assert (missing.status, missing.body["code"], missing.message) == (404, 5, "etcdserver: member not found")
