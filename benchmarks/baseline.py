"""The bare-SDK baseline: the same resources as a real run, registered with no program logic.

Given what a run of the real program recorded, `replay_program` registers each resource again,
in recorded order (the SDK sends parents and dependencies first, so that order is topological),
as a plain `CustomResource`, `ComponentResource` (remote when the record carries a provider, as
only remote components do) or `ProviderResource` with the recorded type, name, parent,
dependencies, inputs (secrets re-wrapped as secret Outputs), provider, provider version,
`protect` and `ignoreChanges`. No validation, no invokes, no `apply`, no typed args: what is left
is the SDK's and the mock runtime's own cost for that many resources, the floor a program can reach.

Each registration also carries a source position, as the plan's do and as the engine keeps in
the state: the SDK records one only for a resource built through a class of its own (it looks
for the third `__init__` on the stack: the class, `CustomResource` or `ComponentResource`, then
`Resource`), which is what every real program does, so the baseline builds through thin
subclasses that only forward. Built through the SDK classes directly, a registration carries
none, and the baseline skips work the engine needs (the `as_uri` of every frame below the
constructor), which no real program can skip.

`replay_program(records, typed=True)` is the typed-SDK floor: the same, except that every
resource of a provider package's `index` module (`vsphere:index/virtualMachine:VirtualMachine`,
`tls:...`, `random:...`) is built through its typed class in `pulumi_<package>`, as any program
written with those packages does. It measures what the typed classes themselves cost (an Output
per declared property, type-driven serialization), apart from what our program adds.

`recorded_shape` is what must be identical between the runs for the comparison to be fair.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pulumi
from pulumi import _types as sdk_types
from pulumi.runtime import rpc

from stacks.environment.loader import PROJECT
from stacks.tools.plan.command import write_plan
from stacks.tools.plan.mock_runtime import ProgramRun, RecordedResource, run_program, run_program_file

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


class _ReplayedCustom(pulumi.CustomResource):
    def __init__(self, t: str, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(t, name, props, opts)


class _ReplayedComponent(pulumi.ComponentResource):
    def __init__(self, t: str, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions, *, remote: bool) -> None:
        super().__init__(t, name, props, opts, remote=remote)


_TYPED_TOKEN = re.compile(r"^(?P<package>[a-z]+):index/[A-Za-z0-9]+:(?P<cls>[A-Za-z0-9]+)$")


class TypedClass:
    """A provider package's typed resource class, with its Pulumi-to-Python argument names."""

    def __init__(self, cls: type[pulumi.CustomResource], args_cls: type) -> None:
        self.cls = cls
        self.python_names = {
            pulumi: python for python, pulumi in sdk_types.input_type_py_to_pulumi_names(args_cls).items()
        }

    def build(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
        # Nested values stay keyed by their Pulumi names: the SDK passes unknown keys through.
        kwargs = {self.python_names[key]: value for key, value in props.items()}
        return self.cls(name, opts=opts, **kwargs)


@cache
def typed_class(type_token: str) -> TypedClass | None:
    """The typed class for `type_token` if it lives in an installed `pulumi_<package>`'s index."""
    match = _TYPED_TOKEN.match(type_token)
    if not match:
        return None
    try:
        module = importlib.import_module(f"pulumi_{match['package']}")
    except ImportError:
        return None
    cls = getattr(module, match["cls"], None)
    args_cls = getattr(module, f"{match['cls']}Args", None)
    if cls is None or args_cls is None:
        return None
    return TypedClass(cls, args_cls)


def register_records(records: Sequence[RecordedResource], *, typed: bool = False) -> None:
    """Register exactly `records`, and nothing else (see the module's doc)."""
    created: dict[str, pulumi.Resource] = {}
    for record in records:
        provider = created.get(_provider_urn(record.provider)) if record.provider else None
        opts = pulumi.ResourceOptions(
            parent=created.get(record.parent) if record.parent else None,
            depends_on=[created[urn] for urn in record.dependencies if urn in created] or None,
            provider=provider if isinstance(provider, pulumi.ProviderResource) else None,
            protect=record.protect or None,
            ignore_changes=list(record.ignore_changes) or None,
            version=record.version or None,
        )
        props = _as_input(record.inputs)
        typed_cls = typed_class(record.type) if typed and record.custom else None
        resource: pulumi.Resource
        if typed_cls is not None:
            resource = typed_cls.build(record.name, props, opts)
        elif record.type.startswith(_PROVIDER_TYPE):
            package = record.type[len(_PROVIDER_TYPE) :]
            resource = pulumi.ProviderResource(package, record.name, props, opts)
        elif record.custom:
            resource = _ReplayedCustom(record.type, record.name, props, opts)
        else:
            # Only a remote (multi-language) component sends a provider reference.
            remote = record.provider is not None
            resource = _ReplayedComponent(record.type, record.name, props, opts, remote=remote)
        created[record.urn] = resource


REPLAY_PROGRAM_FILE = Path(__file__).with_name("replay_main.py")


def replay_program(records: Sequence[RecordedResource], *, typed: bool = False) -> Callable[[], None]:
    """A program that registers exactly `records`: `replay_main.py` run as `__main__`, as the
    plan runs the project's `__main__.py`, so that both pay the same for how a program is run."""
    return run_program_file(REPLAY_PROGRAM_FILE, init_globals={"RECORDS": records, "TYPED": typed})


def replay_stack(records: Sequence[RecordedResource], *, stack: str, out_dir: Path, typed: bool = False) -> ProgramRun:
    """`plan_stack` for the replay: run it under the same mock runtime, write the same files."""
    run = run_program(replay_program(records, typed=typed), project=PROJECT, stack=stack, config={}, secret_keys=[])
    write_plan(run, out_dir)
    return run


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
            r.source_position is not None,
            r.version,
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
            "source_position": r.source_position,
            "version": r.version,
        }
        for r in records
    ]
    path.write_text(json.dumps(rows), encoding="utf-8")


def load_records(path: Path) -> list[RecordedResource]:
    return [RecordedResource(**row) for row in json.loads(path.read_text(encoding="utf-8"))]
