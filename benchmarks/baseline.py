"""The bare-SDK baseline: the same resources as a real run, registered with no program logic.

Given what a run of the real program recorded, `replay_program` registers each resource again,
in recorded order (the SDK sends parents and dependencies first, so that order is topological),
as a plain `CustomResource`, `ComponentResource` (remote when the record carries a provider, as
only remote components do) or `ProviderResource` with the recorded type,
name, parent, dependencies, inputs (secrets re-wrapped as secret Outputs), provider, `protect`
and `ignoreChanges`. No validation, no invokes, no `apply`, no typed args: what is left is the
SDK's and the mock runtime's own cost for that many resources, the floor a program can reach.

`recorded_shape` is what must be identical between the two runs for the comparison to be fair.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import rpc

from stacks.mock_runtime import RecordedResource

_PROVIDER_TYPE = "pulumi:providers:"


def _as_input(value: Any) -> Any:
    if rpc.is_rpc_secret(value):
        return pulumi.Output.secret(_plain(rpc.unwrap_rpc_secret(value)))
    if isinstance(value, dict):
        return {k: _as_input(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_input(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    if rpc.is_rpc_secret(value):
        return _plain(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _provider_urn(reference: str) -> str:
    """A provider reference is `<urn>::<id>`; URNs contain `::` themselves."""
    return reference.rsplit("::", 1)[0]


def replay_program(records: Sequence[RecordedResource]) -> Callable[[], None]:
    """A program that registers exactly `records`, and nothing else."""

    def program() -> None:
        created: dict[str, pulumi.Resource] = {}
        for record in records:
            provider = created.get(_provider_urn(record.provider)) if record.provider else None
            opts = pulumi.ResourceOptions(
                parent=created.get(record.parent) if record.parent else None,
                depends_on=[created[urn] for urn in record.dependencies if urn in created] or None,
                provider=provider if isinstance(provider, pulumi.ProviderResource) else None,
                protect=record.protect or None,
                ignore_changes=list(record.ignore_changes) or None,
            )
            props = _as_input(record.inputs)
            resource: pulumi.Resource
            if record.type.startswith(_PROVIDER_TYPE):
                package = record.type[len(_PROVIDER_TYPE) :]
                resource = pulumi.ProviderResource(package, record.name, props, opts)
            elif record.custom:
                resource = pulumi.CustomResource(record.type, record.name, props, opts)
            else:
                # Only a remote (multi-language) component sends a provider reference.
                remote = record.provider is not None
                resource = pulumi.ComponentResource(record.type, record.name, props, opts, remote=remote)
            created[record.urn] = resource

    return program


def recorded_shape(records: Sequence[RecordedResource]) -> list[tuple[Any, ...]]:
    """Per resource, everything the baseline promises to reproduce, in a comparable form.

    Sorted by URN: the order in which registrations reach the monitor depends on when each
    resource's inputs resolve, which is not part of the promise.
    """
    return sorted(
        (
            r.urn,
            r.type,
            r.name,
            r.parent,
            r.custom,
            tuple(r.dependencies),
            json.dumps(r.inputs, sort_keys=True, default=repr),
            r.provider,
            r.protect,
            tuple(r.ignore_changes),
        )
        for r in records
    )


def save_records(records: Sequence[RecordedResource], path: Path) -> None:
    """Write records as JSON, secrets still wrapped (benchmark stacks hold only placeholders)."""
    rows = [
        {
            "urn": r.urn,
            "type": r.type,
            "name": r.name,
            "parent": r.parent,
            "custom": r.custom,
            "dependencies": r.dependencies,
            "inputs": r.inputs,
            "provider": r.provider,
            "protect": r.protect,
            "ignore_changes": r.ignore_changes,
        }
        for r in records
    ]
    path.write_text(json.dumps(rows), encoding="utf-8")


def load_records(path: Path) -> list[RecordedResource]:
    return [RecordedResource(**row) for row in json.loads(path.read_text(encoding="utf-8"))]
