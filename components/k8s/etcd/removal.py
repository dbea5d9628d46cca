"""Removing a control-plane node's etcd member through another member, never at quorum's cost.

The member is identified by its peer URL (`https://<node address>:2380`, what kubeadm
advertises) or its name (kubeadm names members after nodes). A learner is removed as it is (it does
not vote). For a voting member, each remaining voting member's status is read from its own client
URL (`/v3/maintenance/status`): healthy when it answers, as itself, knowing a leader and with no
alarm. The removal goes ahead only if the healthy remaining voters are a majority of the
remaining voters; otherwise it is retried every `poll_seconds` (a member just replaced may still
be catching up) until `timeout_seconds`, then fails naming the unhealthy members, and the VM is not
touched. etcd's own check (`--strict-reconfig-check`, on by default: `mayRemoveMember` refuses
with "not enough started members" or "unhealthy cluster") is honoured the same way. A member that
is not in the list, or that etcd no longer finds (404 "member not found"), is success: a delete
cut half way and run again finishes cleanly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from components.k8s.etcd.gateway import (
    CLIENT_PORT,
    MEMBER_LIST,
    MEMBER_REMOVE,
    MEMBER_STATUS,
    Gateway,
    Member,
    client_url,
    peer_url,
)
from components.k8s.rollout.drain import DEFAULT_TIMEOUT_SECONDS, POLL_SECONDS

TIMEOUT_KEY = "kubernetes.drainTimeoutMinutes"
_REFUSALS = (400, 503)
"""etcd's own quorum guard: FailedPrecondition ("not enough started members") is 400,
Unavailable ("unhealthy cluster", "request timed out") 503: retried, never forced."""


class EtcdMemberError(Exception):
    """The member could not be removed (quorum, unreachable endpoints, a refusal)."""


@dataclass
class Removal:
    outcome: Literal["removed", "absent", "last-member"]
    member: Member | None = None
    via: str = ""
    """The endpoint that removed it."""


@dataclass
class _Health:
    healthy: list[Member] = field(default_factory=list)
    unhealthy: dict[str, str] = field(default_factory=dict)
    """Member label -> why."""


def _list_members(gateway: Gateway, endpoints: Sequence[str]) -> list[Member]:
    problems = []
    for endpoint in endpoints:
        try:
            answer = gateway.post(endpoint, MEMBER_LIST, {})
        except OSError as error:
            problems.append(f"{endpoint}: {error}")
            continue
        if answer.status == 200:
            return [Member.from_json(raw) for raw in answer.body.get("members", [])]
        problems.append(f"{endpoint}: HTTP {answer.status} {answer.message}".rstrip())
    # Not retried: the drain just went through the API server, so etcd has quorum; an endpoint that
    # does not answer is a network, firewall or certificate problem, not a transient one.
    raise EtcdMemberError(
        "no etcd endpoint answered the member list (" + "; ".join(problems) + "). The node is drained and its VM "
        "was not deleted: check that this machine reaches the control-plane nodes on etcd's client port and that "
        "the etcd client certificate comes from the cluster's etcd CA, then run pulumi up again"
    )


def _find(members: list[Member], node_name: str, node_address: str) -> Member | None:
    by_peer = [m for m in members if peer_url(node_address) in m.peer_urls]
    return by_peer[0] if by_peer else next((m for m in members if m.name == node_name), None)


def _status(gateway: Gateway, member: Member) -> str | None:
    """None when the member is healthy, else why not."""
    if not member.client_urls:
        return "never started (no client URL)"
    why = ""
    for endpoint in member.client_urls:
        try:
            answer = gateway.post(endpoint, MEMBER_STATUS, {})
        except OSError as error:
            why = f"unreachable at {endpoint} ({error})"
            continue
        if answer.status != 200:
            why = f"status HTTP {answer.status} {answer.message}".rstrip()
        elif int(answer.body.get("header", {}).get("member_id", 0)) != member.id:
            why = f"{endpoint} answers as another member"
        elif not int(answer.body.get("leader", 0)):
            why = "has no leader"
        elif answer.body.get("errors"):
            why = "alarm: " + ", ".join(map(str, answer.body["errors"]))
        else:
            return None
    return why


def _health(gateway: Gateway, members: list[Member]) -> _Health:
    health = _Health()
    for member in members:
        why = _status(gateway, member)
        if why is None:
            health.healthy.append(member)
        else:
            health.unhealthy[member.label] = why
    return health


def remove_etcd_member(
    gateway: Gateway,
    *,
    node_name: str,
    node_address: str,
    other_endpoints: Sequence[str],
    client_port: int = CLIENT_PORT,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    poll_seconds: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Removal:
    """Remove the node's etcd member through another member, keeping quorum. See the module docstring.

    `other_endpoints` are the other control-plane members' client URLs; the node's own endpoint is
    asked only for the member list, when none of them answers (the last member of a cluster being
    destroyed learns so from itself)."""
    own = client_url(node_address, client_port)
    deadline = clock() + timeout_seconds
    while True:
        members = _list_members(gateway, [*other_endpoints, own])
        target = _find(members, node_name, node_address)
        if target is None:
            return Removal("absent")
        remaining = [m for m in members if not m.is_learner and m.id != target.id]
        if not target.is_learner and not remaining:
            return Removal("last-member", target)
        if not other_endpoints:
            raise EtcdMemberError(
                f"etcd member {target.label} of node {node_name} has other members but no other "
                "control-plane address was given to remove it through"
            )
        reason = _quorum_problem(gateway, target, remaining)
        if reason is None:
            removal, reason = _remove(gateway, target, other_endpoints)
            if removal is not None:
                return removal
        if clock() >= deadline:
            raise EtcdMemberError(
                f"etcd member {target.label} of node {node_name} was not removed within "
                f"{timeout_seconds / 60:g} minutes: {reason}. The node is drained and its VM was not deleted: "
                "bring the unhealthy control-plane members back (or replace them one at a time), or raise "
                f"{TIMEOUT_KEY} if they are recovering, then run pulumi up again"
            )
        sleep(poll_seconds)


def _quorum_problem(gateway: Gateway, target: Member, remaining: list[Member]) -> str | None:
    if target.is_learner:
        return None  # a learner does not vote: removing it cannot cost quorum (etcd skips the check too)
    health = _health(gateway, remaining)
    needed = len(remaining) // 2 + 1
    if len(health.healthy) >= needed:
        return None
    unhealthy = "; ".join(f"{label}: {why}" for label, why in health.unhealthy.items())
    return (
        f"removing it would leave {len(health.healthy)} healthy of {len(remaining)} voting members, "
        f"fewer than the {needed} a quorum needs (unhealthy: {unhealthy})"
    )


def _remove(gateway: Gateway, target: Member, endpoints: Sequence[str]) -> tuple[Removal | None, str]:
    """(the removal, "") when done, else (None, why not yet); raises on an unexpected answer."""
    why = ""
    for endpoint in endpoints:
        if endpoint in target.client_urls:
            continue  # through another member: the target stops serving once it is removed
        try:
            answer = gateway.post(endpoint, MEMBER_REMOVE, {"ID": str(target.id)})  # uint64 as a string
        except OSError as error:
            why = f"{endpoint} is unreachable ({error})"
            continue
        if answer.status == 200:
            return Removal("removed", target, endpoint), ""
        if answer.status == 404:  # "etcdserver: member not found": removed meanwhile
            return Removal("absent", target, endpoint), ""
        if answer.status in _REFUSALS:
            return None, f"etcd refused the removal ({answer.message})"
        if answer.status >= 500:
            # This member cannot serve it now, e.g. one that has just removed itself and still
            # answers `raft: stopped` (raft.ErrStopped, Unknown to the gateway: 500): ask the next,
            # and wait for the loop's next round if none can.
            why = f"{endpoint} answered HTTP {answer.status} {answer.message}".rstrip()
            continue
        raise EtcdMemberError(
            f"removing etcd member {target.label} through {endpoint}: HTTP {answer.status} {answer.message}".rstrip()
        )
    return None, f"no other member answered ({why})"
