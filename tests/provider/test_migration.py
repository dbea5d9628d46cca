"""Moving a stack deployed with the dynamic providers to the gpucluster plugin: no resource of ours
is created anew, none replaced, no VM or host resource touched.

The old state is `fixtures/dev-dynamic-era.state.json`, written from the program as it was at
commit c538ec1 (dynamic providers, `__provider` pickles in inputs and outputs; see
`fixtures/make_dynamic_era_state.py`). The new program runs under the offline plan's mocks with
the same stack file. The engine's steps are then what these tests check:
- each new resource finds its old state through its alias (`getOldResource` follows aliases);
- the plugin's Check and Diff, in its own process and as the engine calls them with the old
  outputs, report no change and no replacement for every one of them;
- the offline plan's per-node verdicts (stacks/tools/plan/diff.py) say "unchanged" for every VM,
  and every vSphere resource (hosts' vmknics, the switch, port group, DRS groups) keeps its inputs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pulumi.runtime.proto import provider_pb2

from components.vsphere.first_boot import GUESTINFO_KEYS
from stacks.tools.plan.diff import diff_plans
from stacks.tools.plan.mock_runtime import ProgramRun, RecordedResource, unwrap
from tests.program.conftest import edited_view, run_view
from tests.provider.fixtures.make_dynamic_era_state import fingerprint, with_one_template_copy
from tests.provider.plugin_process import Plugin, configure, unmarshal
from tests.provider.rpc import Lifecycle

STATE = Path(__file__).parent / "fixtures" / "dev-dynamic-era.state.json"
SECRET_SIG = "4dabf18193072939515e22adb298388d"
OUR_KINDS = 15
NEW_SINCE_THE_MIGRATION = frozenset({"gpucluster:vsphere:InitPkiDelivery"})
"""Kinds added after the stacks moved off dynamic providers: no old state to find, created new
(an existing init VM's delivery finishes at once: components/vsphere/pki_delivery.py)."""


def _state_value(value: Any) -> Any:
    """A state value as plain Python (a secret's plaintext decoded)."""
    if isinstance(value, dict) and SECRET_SIG in value:
        return json.loads(value["plaintext"])
    if isinstance(value, dict):
        return {k: _state_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_state_value(v) for v in value]
    return value


@pytest.fixture(scope="module")
def old_state() -> dict[str, dict[str, Any]]:
    resources = json.loads(STATE.read_text())["deployment"]["resources"]
    return {r["urn"]: r for r in resources}


FIXTURE_KUBERNETES = "1.34.2"
"""The stack file's `kubernetes.version` when the fixture was written: a later default in the
shipped stack is a version change (every node rolls), not part of the move to the plugin."""


def _as_when_written(env: dict[str, Any]) -> None:
    with_one_template_copy(env)
    env["kubernetes"]["version"] = FIXTURE_KUBERNETES


@pytest.fixture(scope="module")
def new_run() -> ProgramRun:
    return run_view(edited_view("dev", _as_when_written), "dev")


def _ours(run: ProgramRun) -> list[RecordedResource]:
    """Our resources that existed as dynamic resources."""
    return [
        r
        for r in run.resources
        if r.custom and r.type.startswith("gpucluster:") and r.type not in NEW_SINCE_THE_MIGRATION
    ]


def _old_urn(resource: RecordedResource, old_type: str) -> str:
    """The URN the resource had under the old type: same parent chain, same name."""
    head, name = resource.urn.rsplit("::", 1)
    return f"{head.removesuffix(resource.type)}{old_type}::{name}"


def _new_inputs(resource: RecordedResource) -> tuple[dict[str, Any], set[str]]:
    """The new registration's inputs as the state fixture writes values (fingerprinted)."""
    secret = {k for k, v in resource.inputs.items() if unwrap(v) != v}
    plain = resource.plain_inputs()
    return {k: fingerprint(v, secret=k in secret) for k, v in plain.items()}, secret


def test_moving_from_the_dynamic_provider_is_no_reason_to_replace(plugin: Plugin) -> None:
    """The engine asks the NEW provider's DiffConfig, with the old provider's inputs (the dynamic
    provider's: none), whether resources moving to it must be replaced (pulumi/pulumi
    step_generator.go `providerChanged`, since PR 18509 for explicit providers too): never."""
    from tests.provider.plugin_process import marshal

    news = {"vsphereServer": "vc.lab", "user": "u", "password": "p", "maxConcurrentOperations": 64}
    answer = plugin.stub.DiffConfig(
        provider_pb2.DiffRequest(urn="urn:pulumi:dev::p::pulumi:providers:gpucluster::gpucluster", olds=marshal({}),
                                 news=marshal(news, {"password"}))
    )  # fmt: skip
    assert answer.changes == provider_pb2.DiffResponse.DIFF_UNKNOWN  # the engine compares the inputs
    assert list(answer.replaces) == []


def test_every_resource_of_ours_finds_its_old_state_under_its_alias(
    old_state: dict[str, dict[str, Any]], new_run: ProgramRun
) -> None:
    ours = _ours(new_run)
    assert len({r.type for r in ours}) == OUR_KINDS  # the stack uses every kind
    found = set()
    for resource in ours:
        module, name = resource.type.split(":")[1:]
        old_type = f"pulumi-python:dynamic/{module}:{name}"
        assert resource.alias_types == [old_type], resource.urn
        old_urn = _old_urn(resource, old_type)
        assert old_urn in old_state, f"{resource.urn}: no old state at {old_urn}"
        found.add(old_urn)
    left_behind = {urn for urn, r in old_state.items() if r["type"].startswith("pulumi-python:dynamic/")} - found
    assert left_behind == set()  # nothing would be deleted as gone from the program


def _fresh_token_clock(outputs: dict[str, Any]) -> dict[str, Any]:
    """A token issued an hour before the migration runs (the fixture's date would read as due)."""
    issued = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    expires = issued + timedelta(hours=float(outputs["ttl_hours"]))
    return {
        **outputs,
        "issued_at": issued.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def test_the_plugin_diffs_every_old_resource_clean(
    plugin: Plugin, old_state: dict[str, dict[str, Any]], new_run: ProgramRun
) -> None:
    configure(plugin.stub, {"vsphereServer": None, "user": None, "password": None})
    verdicts = {}
    for resource in _ours(new_run):
        module, name = resource.type.split(":")[1:]
        old = old_state[_old_urn(resource, f"pulumi-python:dynamic/{module}:{name}")]
        old_inputs, old_outputs = _state_value(old["inputs"]), _state_value(old["outputs"])
        assert "__provider" in old_inputs and "__provider" in old_outputs  # as the dynamic host left them
        if name == "JoinTokenRotation":
            old_outputs = _fresh_token_clock(old_outputs)
        news, secret = _new_inputs(resource)
        lifecycle = Lifecycle(plugin.stub, resource.type, resource.name)
        checked = lifecycle.check(news, olds=old_inputs, secret=secret)
        assert list(checked.failures) == [], (resource.urn, checked.failures)
        diff = lifecycle.diff(old["id"], old_outputs, unmarshal(checked.inputs)[0])
        verdicts[resource.name] = (diff.changes, list(diff.replaces), list(diff.diffs))
    # One update, no replacement, that is not the migration's: the version step now also keeps the
    # API server's hardening (issue 40 item 3) and the stack's etcd tag (issue 41 item 5) in the
    # stored ClusterConfiguration, two new inputs.
    # And the join token's lifetime: at most 24 hours since issue 53 item 9 (the fixture's stack
    # had the old default, 168), so the rotation clock is replaced and a new token issued for new
    # nodes; no VM takes it (their first-boot data is ignored), and test_no_vm_is_replaced... holds.
    hardening = {
        "cluster-version": (provider_pb2.DiffResponse.DIFF_SOME, [], ["api_server", "etcd_image_tag"]),
        "bootstrap-token-rotation": (provider_pb2.DiffResponse.DIFF_SOME, ["ttl_hours"], ["ttl_hours"]),
    }
    assert verdicts == {name: hardening.get(name, (provider_pb2.DiffResponse.DIFF_NONE, [], [])) for name in verdicts}
    assert len(verdicts) == len(_ours(new_run))


def test_a_refresh_writes_the_old_state_back_without_the_pickled_provider(
    plugin: Plugin, old_state: dict[str, dict[str, Any]]
) -> None:
    """The kinds whose read asks nothing outside (records, guards, waits), as `pulumi refresh`
    reads them: the answer keeps every value and drops `__provider` from the state."""
    configure(plugin.stub, {"vsphereServer": None, "user": None, "password": None})
    local_reads = [r for r in old_state.values() if r["type"].startswith("pulumi-python:dynamic/kubernetes:")]
    assert len({r["type"] for r in local_reads}) == 9
    for old in local_reads:
        module, name = old["type"].removeprefix("pulumi-python:dynamic/").split(":")
        outputs = _state_value(old["outputs"])
        lifecycle = Lifecycle(plugin.stub, f"gpucluster:{module}:{name}", old["urn"].rsplit("::", 1)[1])
        read_id, read = lifecycle.read(old["id"], outputs, inputs=_state_value(old["inputs"]))
        assert read_id == old["id"]
        assert "__provider" not in read
        assert {k: v for k, v in read.items() if k in outputs} == {k: v for k, v in outputs.items() if k in read}


def _as_planned(resource: dict[str, Any], aliases: dict[str, str]) -> dict[str, Any]:
    return {
        "urn": aliases.get(resource["urn"], resource["urn"]),
        "type": resource["type"],
        "name": resource["urn"].rsplit("::", 1)[1],
        "dependencies": [aliases.get(d, d) for d in resource.get("dependencies", [])],
        "inputs": _state_value(resource.get("inputs", {})),
    }


def test_no_vm_is_replaced_and_no_host_resource_changes(
    old_state: dict[str, dict[str, Any]], new_run: ProgramRun
) -> None:
    aliases = {}
    for resource in _ours(new_run):
        module, name = resource.type.split(":")[1:]
        aliases[_old_urn(resource, f"pulumi-python:dynamic/{module}:{name}")] = resource.urn
    before = [_as_planned(r, aliases) for r in old_state.values() if "inputs" in r]
    after = [
        {
            "urn": r.urn,
            "type": r.type,
            "name": r.name,
            "dependencies": [d for d in r.dependencies if "pulumi:providers:gpucluster" not in d],
            "inputs": _new_inputs(r)[0],
        }
        for r in new_run.resources
        if r.type != "kubernetes:yaml/v2:ConfigGroup"
    ]

    plan = diff_plans(before, after)

    assert len(plan.nodes) == 5
    assert {change.node: change.verdict for change in plan.nodes} == {c.node: "unchanged" for c in plan.nodes}
    assert plan.down_at_once == 0
    old_vsphere = {r["urn"]: r for r in before if r["type"].startswith("vsphere:")}
    new_vsphere = {r["urn"]: r for r in after if r["type"].startswith("vsphere:")}
    assert old_vsphere.keys() == new_vsphere.keys()
    changed = [
        urn for urn in new_vsphere if _managed(new_vsphere[urn]["inputs"]) != _managed(old_vsphere[urn]["inputs"])
    ]
    assert changed == []


def _managed(inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs as the engine diffs them: without the first-boot guestinfo keys, which every VM
    carries under `ignore_changes` (components/vsphere/node_pool.py). The user-data's content
    follows the bootstrap script, which changes on its own schedule; the migration must not."""
    extra = inputs.get("extraConfig")
    if not isinstance(extra, dict):
        return inputs
    return {**inputs, "extraConfig": {k: v for k, v in extra.items() if k not in GUESTINFO_KEYS}}
