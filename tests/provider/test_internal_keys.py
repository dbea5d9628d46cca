"""The dynamic provider host's `__*` keys never reach a handler (provider/values.py, server.py).

A state written before the plugin carries `__provider` (the pickled dynamic provider, a large
base64 string) beside the inputs, and the engine passes it back on every Check, Diff, Read, Update
and Delete. A handler that saw it would diff it as a changed input (every resource of an old stack
"updated" on the first preview), copy it into its outputs, or try to use it. The plugin's server is
driven here as the engine drives it, request objects in and out, with a kind whose handlers record
every mapping they are given.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest
from pulumi.provider.experimental import provider as p
from pulumi.provider.experimental.property_value import PropertyValue

from components import resource_handlers as handlers
from provider import kinds
from provider.server import GpuclusterProvider

TOKEN = "gpucluster:test:Recorder"
URN = f"urn:pulumi:dev::vsphere-gpu-cluster::{TOKEN}::recorder"
OLD_DYNAMIC_STATE = {"__provider": "gASV...pickled provider...", "__nested": {"x": 1.0}, "name": "a", "size": 2.0}
NEW_INPUTS = {"__provider": "gASV...pickled provider...", "name": "a", "size": 3.0}


class Recorder(handlers.ResourceHandlers):
    seen: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> handlers.CheckResult:
        self.seen += [("check olds", olds), ("check news", news)]
        return handlers.CheckResult(news)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        self.seen += [("diff olds", olds), ("diff news", news)]
        return handlers.DiffResult()

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        self.seen.append(("create", props))
        return handlers.CreateResult("id-1", dict(props))

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        self.seen.append(("read", props))
        return handlers.ReadResult(id_, dict(props))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        self.seen += [("update olds", olds), ("update news", news)]
        return handlers.UpdateResult(dict(news))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        self.seen.append(("delete", props))


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> GpuclusterProvider:
    Recorder.seen = []
    monkeypatch.setitem(kinds.HANDLERS, TOKEN, Recorder)  # type: ignore[index]
    return GpuclusterProvider()


def props(values: dict[str, Any]) -> dict[str, PropertyValue]:
    return {key: _raw(value) for key, value in values.items()}


def _raw(value: Any) -> PropertyValue:
    """A property value as the engine sends it, `__*` keys included (property_map drops them)."""
    if isinstance(value, dict):
        return PropertyValue({k: _raw(v) for k, v in value.items()})
    return PropertyValue(value)


async def every_operation(provider: GpuclusterProvider) -> list[p.ReadResponse | p.UpdateResponse]:
    old, new = props(OLD_DYNAMIC_STATE), props(NEW_INPUTS)
    await provider.check(p.CheckRequest(URN, old, new, b""))
    await provider.diff(p.DiffRequest(URN, "id-1", old, new, []))
    await provider.create(p.CreateRequest(URN, new, 60, False))
    read = await provider.read(p.ReadRequest(URN, "id-1", old, new))
    update = await provider.update(p.UpdateRequest(URN, "id-1", old, new, 60, [], False))
    await provider.delete(p.DeleteRequest(URN, "id-1", old, 60))
    return [read, update]


def test_no_handler_sees_a_dynamic_provider_key(provider: GpuclusterProvider) -> None:
    asyncio.run(every_operation(provider))
    assert [call for call, _ in Recorder.seen] == [
        "check olds", "check news", "diff olds", "diff news", "create", "read", "update olds", "update news", "delete",
    ]  # fmt: skip
    leaked = {call: sorted(k for k in given if k.startswith("__")) for call, given in Recorder.seen}
    assert leaked == {call: [] for call, _ in Recorder.seen}
    assert dict(Recorder.seen)["diff news"] == {"name": "a", "size": 3.0}


def test_an_old_dynamic_state_diffs_on_its_inputs_alone(provider: GpuclusterProvider) -> None:
    """Only `size` changed: `__provider` (present in the old state alone) is no difference."""
    old = props(OLD_DYNAMIC_STATE)
    same = props({k: v for k, v in OLD_DYNAMIC_STATE.items() if k != "__nested"})
    answer = asyncio.run(provider.diff(p.DiffRequest(URN, "id-1", old, props(NEW_INPUTS), [])))
    assert answer.diffs == ["size"]
    unchanged = asyncio.run(provider.diff(p.DiffRequest(URN, "id-1", old, same, [])))
    assert not unchanged.changes and not unchanged.diffs


def test_nothing_written_back_carries_a_dynamic_provider_key(provider: GpuclusterProvider) -> None:
    for response in asyncio.run(every_operation(provider)):
        assert not [key for key in response.properties if key.startswith("__")]
