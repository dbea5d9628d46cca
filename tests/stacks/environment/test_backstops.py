"""Backstops: the components' own checks run by `validate`, so a check that lives only in a
component can never again stop `plan` after `validate` passed (issue 15's escapes)."""

from __future__ import annotations

from typing import Any

import pytest

from stacks.environment import registry, rules
from stacks.environment.model import Environment
from stacks.environment.registry import format_path
from stacks.environment.rules.components import node_bootstrap_accepts_the_cluster
from tests.stack_fixtures import fixture_stack

ESCAPES = [
    ("service range /11", ("kubernetes", "serviceCidr"), "10.96.0.0/11", "kubernetes.serviceCidr"),
    ("cluster name over 63", ("vm", "namePrefix"), "a" * 62, "vm.namePrefix"),
]


def _edit(raw: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    section = dict(raw[path[0]])
    section[path[1]] = value
    return {**raw, path[0]: section}


@pytest.mark.parametrize(("path", "value", "key"), [c[1:] for c in ESCAPES], ids=[c[0] for c in ESCAPES])
def test_the_bootstrap_check_alone_refuses_the_escapes(
    dev_raw: dict[str, Any], path: Any, value: Any, key: str
) -> None:
    env = Environment.model_validate(_edit(dev_raw, path, value))
    found = [(format_path("", p.path), p.message) for p in node_bootstrap_accepts_the_cluster(env)]
    assert [k for k, _ in found] == [key]
    assert found[0][1].startswith("the node bootstrap refuses this: ")


@pytest.mark.parametrize(("path", "value", "key"), [c[1:] for c in ESCAPES], ids=[c[0] for c in ESCAPES])
def test_a_backstop_is_silent_where_a_rule_spoke(dev_raw: dict[str, Any], path: Any, value: Any, key: str) -> None:
    env = Environment.model_validate(_edit(dev_raw, path, value))
    problems = rules.check(env)
    assert [format_path("", p.path) for p in problems] == [key]
    assert not problems[0].message.startswith("the node bootstrap refuses this")


def test_a_backstop_speaks_where_no_rule_does(dev_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the service-range rule, the bootstrap's own check still refuses it in `validate`."""
    monkeypatch.setattr(registry, "RULES", [r for r in registry.RULES if r.__name__ != "service_cidr_size"])
    env = Environment.model_validate(_edit(dev_raw, ("kubernetes", "serviceCidr"), "10.96.0.0/11"))
    problems = registry.check(env)
    assert [format_path("", p.path) for p in problems] == ["kubernetes.serviceCidr"]
    assert "kube-apiserver refuses it" in problems[0].message


@pytest.mark.parametrize("stack", ["dev", "staging", "prod", "sim"])
def test_the_shipped_stacks_pass_every_backstop(stack: str, root: Any) -> None:
    from stacks.environment.loader import load_environment, read_stack_file

    env = load_environment(read_stack_file(fixture_stack(stack)))
    assert [p for b in registry.BACKSTOPS for p in b(env)] == []
