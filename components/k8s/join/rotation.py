"""JoinTokenRotation: the clock behind the join token's lifetime (a small resource of ours).

Why a resource: Pulumi programs have no stable "now". The join token's `expiration` must be a
fixed timestamp in state (else every preview would show a change), yet it must move forward
before it runs out. This resource records when the current token was issued and when it expires,
and its `diff` (which Pulumi calls on every preview and up) compares that with the real clock:
once less than half of the lifetime is left, it asks for a replacement. The token's two
pulumi-random halves carry `issued_at` as a keeper, so a new issue means a new token id and
secret, a new `bootstrap-token-<id>` Secret (`join_token.py`), and user-data with the new token
for VMs created from then on. Existing nodes never need the token again after joining (their
kubelets renew their own client certificates), and their first-boot data is ignored by the node
pools, so rotation touches no VM.

The rule "renew when less than half is left" means that after any `pulumi up` the token stays
valid for at least half its lifetime: a node added by that run has that long to join.

Lifecycle: `create` reads the clock; `diff` replaces on a new lifetime or when renewal is due;
`update` is never needed (every change replaces) and keeps the recorded times; `read` reports
the recorded times (there is nothing outside Pulumi to read: the Secret in the cluster is the
Kubernetes provider's to read); `delete` does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pulumi

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource

MIN_TTL_HOURS = 2
"""Renewal at half-life leaves a node at least one hour to join after the run that created it."""
MAX_TTL_HOURS = 87600
"""Ten years, the CA's lifetime: anything longer outlives the cluster's trust anyway."""


def utc_now() -> datetime:
    """The real clock (tests replace this function)."""
    return datetime.now(UTC)


def format_rfc3339(moment: datetime) -> str:
    """UTC, whole seconds, `Z`: the form kubeadm writes into `expiration` (Go's time.RFC3339)."""
    return moment.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def expiry(issued_at: datetime, ttl_hours: float) -> datetime:
    return issued_at + timedelta(hours=ttl_hours)


def renewal_due(expires_at: datetime, ttl_hours: float, now: datetime) -> bool:
    """True once less than half of the lifetime is left (or it has run out)."""
    return now >= expires_at - timedelta(hours=ttl_hours / 2)


def validate_ttl_hours(ttl_hours: int) -> list[str]:
    if not MIN_TTL_HOURS <= ttl_hours <= MAX_TTL_HOURS:
        return [f"join_token_ttl_hours must be between {MIN_TTL_HOURS} and {MAX_TTL_HOURS}, got {ttl_hours}"]
    return []


def _issue(ttl_hours: float, now: datetime) -> dict[str, Any]:
    return {
        "ttl_hours": ttl_hours,
        "issued_at": format_rfc3339(now),
        "expires_at": format_rfc3339(expiry(now.replace(microsecond=0), ttl_hours)),
    }


class JoinTokenRotationProvider(handlers.ResourceHandlers):
    """See the module docstring; holds no secret and no state of its own."""

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        outs = _issue(float(props["ttl_hours"]), utc_now())
        return handlers.CreateResult(id_=f"join-token-{outs['issued_at']}", outs=outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        new_ttl = float(news["ttl_hours"])
        old_ttl = olds.get("ttl_hours")
        if old_ttl is None or float(old_ttl) != new_ttl:
            replaces = ["ttl_hours"]
        elif not olds.get("expires_at") or renewal_due(parse_rfc3339(str(olds["expires_at"])), new_ttl, utc_now()):
            replaces = ["expires_at"]
        else:
            replaces = []
        return handlers.DiffResult(changes=bool(replaces), replaces=replaces, delete_before_replace=False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        # Unreachable in practice (diff never reports an in-place change); keep what was issued.
        return handlers.UpdateResult(outs={**olds, "ttl_hours": float(news["ttl_hours"])})

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        return handlers.ReadResult(id_=id_, outs=props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        pulumi.log.debug(f"JoinTokenRotation {_id}: nothing to delete (a timestamp leaves nothing behind)")


@dataclass(frozen=True, kw_only=True)
class JoinTokenRotationArgs:
    ttl_hours: int
    """Lifetime of each join token; renewed by the first `pulumi up` after half of it passed."""

    def __post_init__(self) -> None:
        errors = validate_ttl_hours(self.ttl_hours)
        if errors:
            raise ValueError(errors[0])


class JoinTokenRotation(GpuclusterResource, module="kubernetes", name="JoinTokenRotation"):
    """When the current join token was issued and when it expires (RFC 3339, UTC)."""

    issued_at: pulumi.Output[str]
    """Issue time of the current token: the keeper that rotates the token's random halves."""
    expires_at: pulumi.Output[str]
    """The token's `expiration`, as the bootstrap-token Secret carries it."""

    def __init__(self, name: str, args: JoinTokenRotationArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            name,
            {"ttl_hours": args.ttl_hours, "issued_at": None, "expires_at": None},
            opts,
        )
