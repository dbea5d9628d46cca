"""Every key of the environment declares what changing it does to a live cluster (issue 28).

The table test walks the real models: a key added later without a day-two entry fails here, and so
does an entry left behind for a key that no longer exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import Field

from stacks.environment.day_two.check import day_two_report
from stacks.environment.day_two.classes import DAY_TWO, DayTwo, undeclared_keys
from stacks.environment.key_paths import model_keys
from stacks.environment.loader import ConfigView, load_environment
from stacks.environment.model import Environment, KubernetesSettings, Model
from tests.stacks.conftest import EnvEdit

Edited = Callable[[EnvEdit], Environment]


def test_every_key_of_the_model_declares_its_day_two_class() -> None:
    keys = model_keys(Environment)
    assert len(keys) > 90  # the walk reaches nested models and list items, not just the top level
    assert {"kubernetes.podCidr", "gpuWorkers.nodes[].managementIp", "kubernetes.cni.version"} <= set(keys)
    assert "gpuWorkers.nodes" in keys  # a list keyed by name: adding or removing one is a change too
    assert undeclared_keys(Environment) == []
    assert set(DAY_TWO) == set(keys), sorted(set(DAY_TWO) ^ set(keys))  # no entry for a key that is gone


class _DummyKubernetes(KubernetesSettings):
    dummy_knob: int = 0


class _EnvironmentWithNewKeys(Environment):
    new_top_level: bool = False
    kubernetes: _DummyKubernetes = _DummyKubernetes()


def test_a_key_added_without_a_declaration_is_found() -> None:
    """What a developer adding a field sees: the walk finds it, at the top level and nested."""
    assert undeclared_keys(_EnvironmentWithNewKeys) == ["kubernetes.dummyKnob", "newTopLevel"]


class _Leaf(Model):
    value: int = 0


class _WithListOfModels(Model):
    items: list[_Leaf] = Field(default_factory=list)
    maybe: _Leaf | None = None


def test_the_walk_enters_lists_and_optional_models() -> None:
    assert model_keys(_WithListOfModels) == ["items", "items[].value", "maybe.value"]


@pytest.mark.parametrize("key", sorted(DAY_TWO))
def test_each_entry_says_what_happens_and_the_procedure(key: str) -> None:
    entry: DayTwo = DAY_TWO[key]
    assert entry.happens and entry.procedure, key
    # What is not obvious (a rebuild, a value that lives elsewhere, a refusal) names its upstream rule.
    if entry.cls in ("rebuild", "no-effect-on-existing") or entry.refused_always:
        assert entry.source, key
    if entry.cls == "rebuild":
        assert entry.refused_always, key  # a rebuild is never applied without being stated


@pytest.fixture
def before(dev_view: ConfigView) -> Environment:
    return load_environment(dev_view)


@pytest.fixture
def edited(edited_view: Callable[..., ConfigView]) -> Edited:
    return lambda edit: load_environment(edited_view(edit))


def test_a_pod_cidr_change_is_refused_until_the_rebuild_is_stated(before: Environment, edited: Edited) -> None:
    after = edited(lambda env: env["kubernetes"].update(podCidr="10.32.0.0/16"))
    report = day_two_report(before, after)
    (change,) = report.changes
    assert (change.key, change.entry.cls, change.refused) == ("kubernetes.podCidr", "no-effect-on-existing", True)
    assert [c.key for c in report.refused] == ["kubernetes.podCidr"]
    text = "\n".join(report.lines())
    assert "kubernetes.podCidr 10.244.0.0/16 -> 10.32.0.0/16" in text
    assert "--accept-rebuild kubernetes.podCidr" in text
    accepted = day_two_report(before, after, accepted=["kubernetes.podCidr"])
    assert not accepted.refused and accepted.changes[0].accepted


def test_list_items_are_matched_by_name_not_position(before: Environment, edited: Edited) -> None:

    def move_and_readdress(env: dict[str, Any]) -> None:
        nodes = env["gpuWorkers"]["nodes"]
        nodes.reverse()  # reordering is no change
        nodes[0]["managementIp"] = "10.10.0.99"  # worker-4 (last before the reverse)

    report = day_two_report(before, edited(move_and_readdress))
    assert [(c.key, c.where) for c in report.changes] == [
        ("gpuWorkers.nodes[].managementIp", "gpuWorkers.nodes[worker-4].managementIp")
    ]
    assert report.changes[0].refused
    # Accepting by the table key or by the node's own path both state it.
    for key in ("gpuWorkers.nodes[].managementIp", "gpuWorkers.nodes[worker-4].managementIp"):
        assert not day_two_report(before, edited(move_and_readdress), accepted=[key]).refused


def test_adding_a_host_and_worker_are_membership_changes_taken_in_place(before: Environment, edited: Edited) -> None:
    def add(env: dict[str, Any]) -> None:
        env["hosts"].append({"name": "esxi-05.lab.example.com", "rdmaVmnics": ["vmnic4"], "vmknicIp": "192.168.0.28"})
        env["gpuWorkers"]["nodes"].append(
            {
                "name": "worker-5",
                "managementIp": "10.10.0.55",
                "rdmaIp": "192.168.0.55",
                "host": "esxi-05.lab.example.com",
            }
        )

    report = day_two_report(before, edited(add))
    assert [(c.key, c.entry.cls, c.refused) for c in report.changes] == [
        ("hosts", "in-place", False),
        ("gpuWorkers.nodes", "in-place", False),
    ]
    assert report.lines()[0] == "hosts added esxi-05.lab.example.com: takes effect on the next `pulumi up`"


def test_replacing_every_control_plane_node_at_once_is_refused(before: Environment, edited: Edited) -> None:
    """No old member left: the new VMs cannot join anything, they start a new, empty cluster."""

    def rename(env: dict[str, Any]) -> None:
        env["controlPlane"]["nodes"][0]["name"] = "cp-new"

    report = day_two_report(before, edited(rename))
    assert [(c.key, c.refused) for c in report.changes] == [("controlPlane.nodes", True)]


def test_an_accept_for_a_key_nothing_refuses_is_reported_as_unused(before: Environment) -> None:
    report = day_two_report(before, before, accepted=["kubernetes.podCIDR"])
    assert report.unused_accepts == ["kubernetes.podCIDR"]
    assert report.changes == [] and report.lines() == []


@pytest.mark.parametrize("key", ["controlPlane.nodes[].managementIp", "gpuWorkers.nodes[].managementIp"])
def test_re_addressing_says_the_vm_keeps_its_mac_and_cites_why(key: str) -> None:
    """terraform-provider-vsphere's NetworkInterfaceSubresource.Update writes `mac_address` only when
    `use_static_mac` changes, and the node pools always set it: a running VM keeps its MAC, and the
    plan shows the diff again on every run. Still a rebuild (refused)."""
    entry = DAY_TWO[key]
    assert entry.cls == "rebuild" and entry.refused_always
    assert "in place" not in entry.happens and "edits the MAC" not in entry.source
    assert "keeps its MAC" in entry.happens and "every" in entry.happens
    assert "use_static_mac" in entry.source
