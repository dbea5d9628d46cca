"""The small protocol each resource kind's handlers implement: check, diff, create, read, update,
delete and configure on plain Python values, run on a worker thread of the `gpucluster` provider
plugin (`provider/`).

It has the shape of `pulumi.dynamic.ResourceProvider` (SDK 3.272, pulumi/dynamic/dynamic.py),
which these handlers were written against, so each kind's logic moved over unchanged: same method
signatures, same result classes, same defaults (check passes inputs through, read returns what it
was given). What differs is who runs them: the plugin's server (`provider/server.py`) picks the
handlers by type token, never a pickle from the state, and it converts the engine's property
values to plain values (unknowns become `rpc.UNKNOWN`, secrets are unwrapped and marked again on
the way out).

No Pulumi engine calls here: the plugin process has no program to talk to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CheckFailure:
    property: str
    reason: str


@dataclass
class CheckResult:
    inputs: dict[str, Any]
    failures: list[CheckFailure] = field(default_factory=list)


@dataclass
class DiffResult:
    changes: bool | None = None
    """None: the handlers cannot tell; the plugin then compares the inputs key by key."""
    replaces: list[str] | None = None
    stables: list[str] | None = None
    delete_before_replace: bool | None = None


class CreateResult:
    def __init__(self, id_: str, outs: dict[str, Any] | None = None) -> None:
        self.id = id_
        self.outs = outs


class ReadResult:
    def __init__(self, id_: str | None = None, outs: dict[str, Any] | None = None) -> None:
        self.id = id_
        """Empty or None: the object is gone, and the engine drops the resource from the state."""
        self.outs = outs


@dataclass
class UpdateResult:
    outs: dict[str, Any] | None = None


@dataclass(frozen=True)
class ConfigureRequest:
    """The provider's configuration, keyed as the stack config keys the handlers read
    (`vsphere:vsphereServer`, ...): `config.get(key)` like `pulumi.dynamic.Config`."""

    config: Mapping[str, Any]


class ResourceHandlers:
    """One resource kind's operations. Subclasses override what they need; the defaults are the
    ones `pulumi.dynamic.ResourceProvider` had, so no kind's behaviour changed in the move."""

    def configure(self, req: ConfigureRequest) -> None:
        """Called once per plugin configuration, before any other method."""

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return CheckResult(news, [])

    def diff(self, _id: str, _olds: dict[str, Any], _news: dict[str, Any]) -> DiffResult:
        return DiffResult()

    def create(self, props: dict[str, Any]) -> CreateResult:
        raise NotImplementedError(f"{type(self).__name__} does not implement create")

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_, props)

    def update(self, _id: str, _olds: dict[str, Any], _news: dict[str, Any]) -> UpdateResult:
        return UpdateResult()

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing to remove by default (a wait or a timestamp leaves nothing behind)."""
