"""The test tiers: `fast` (the loop a developer lives in) and `slow` (real programs and slow runs).

tests/conftest.py marks every collected test with its tier (`mark_tiers`).

`bash scripts/test.sh` runs both; `.venv/bin/python -m pytest -m fast` runs the fast tier alone
(docs/tests.md gives its time and what it catches). The tier is decided here, at collection, so
no test file carries it by hand and a new test cannot land in the wrong tier by forgetting a mark:

- `slow`: every test that reaches a real program: it carries the `vcsim` mark, or it uses, through
  its own module or any fixture it asks for, a helper of `tests/real_parts.py` (the one way the
  suite finds etcd, sshd, cloud-init, containerd, nft, ip netns or the simulator), directly or
  through a helper module that does (`etcd_real.py`, `sshd_real.py`, the simulator's conftest);
- `slow` too: the tests asking for a fixture of `SLOW_FIXTURES`, and the test modules in
  `SLOW_MODULES`, which run no outside program but take seconds
  each (whole-program runs of the largest stacks, benchmarks, a CLI in child processes), each
  with its reason;
- `fast`: everything else.

`tests/workflow/test_test_tiers.py` holds the rules to their promise (a test that starts a real
program is never `fast`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import pytest

REAL_PARTS_MODULE = "tests.real_parts"

SLOW_FIXTURES: dict[str, str] = {
    "cli": "`python -m stacks` in a child process, as a user runs it (tests/stacks/conftest.py): "
    "an interpreter's start and the command's imports, a second or more a test",
}
"""Fixtures whose tests go to the `slow` tier whatever module they are in."""

SLOW_MODULES: dict[str, str] = {
    "tests/stacks/environment/test_mutation.py": "whatever validate accepts, planned: hundreds of whole-program runs",
    "tests/benchmarks/test_scale.py": "plans of 512 workers under the mock runtime",
    "tests/benchmarks/test_deploy_time.py": "the deployment-time model at 64 and 512 workers",
    "tests/benchmarks/test_baseline.py": "the benchmark's baseline program run",
    "tests/provider/test_plugin_kubernetes.py": "the plugin's own process over gRPC",
    "tests/provider/test_migration.py": "the plugin's own process over gRPC, a whole migrated state",
    "tests/stacks/test_outside_venv.py": "creates a virtualenv",
    "tests/stacks/tools/plan/test_plan_outputs.py": "`python -m stacks plan` in child processes, Graphviz drawing PNG and SVG",
    "tests/workflow/test_plan_comment.py": "the workflow's own plan step in child processes and scratch git clones",
    "tests/workflow/test_plan_comment_reviews.py": "the workflow's review step in child processes, a git remote and a gh double",
    "tests/workflow/test_site_stacks.py": "the workflows' own steps in a scratch clone of a site's repository, two stacks planned",
    "tests/stacks/tools/comment/test_comment.py": "`python -m stacks comment` in child processes, each a plan",
    "tests/stacks/tools/verify/test_verify.py": "`python -m stacks verify` in child processes against a fake kubectl program",
    "tests/stacks/tools/availability/test_availability.py": "`verify --availability` in child processes with fake kubectl and ssh programs",
    "tests/test_user_stacks.py": "copies the repository and runs pytest itself there",
    "tests/stacks/tools/verify/test_verify_gpu_cli.py": "`python -m stacks verify` in child processes against a fake kubectl program",
    "tests/stacks/tools/verify/test_verify_log.py": "`python -m stacks verify --log` in child processes",
    "tests/stacks/tools/deploy_settings/test_deploy_settings.py": "`python -m stacks deploy-settings` and `plan` in child processes",
    "tests/program/test_template_replicas.py": "whole-program runs of 32 and more workers under the mock runtime",
    "tests/workflow/test_test_tiers.py": "collects the whole suite twice, in child processes",
    "tests/program/test_first_boot.py::test_every_address_of_a_subnet_gets_its_own_mac": "two million MACs, one by one",
    "tests/components/k8s/node_bootstrap/test_bootstrap_script_runs.py::test_a_boot_cut_at_any_step_recovers_on_the_next_boot": (
        "the bootstrap cut at every call that changes the node, two boots each: dozens of script runs a test"
    ),
    "tests/components/k8s/node_bootstrap/test_bootstrap_replaced_init_node.py::test_a_replaced_first_node_cut_at_any_step_never_inits": (
        "the bootstrap cut at every call that changes the node, two boots each"
    ),
}
"""Test modules, or single tests (`path::function`), paths from the repository root, in the `slow`
tier though they reach no real program: each takes seconds, mostly child processes of our own
commands. Measured: docs/tests.md, "Tiers"."""


def _references(namespace: dict[str, Any], modules: set[str]) -> bool:
    """True when a module's globals hold a module of `modules` or anything defined in one."""
    for value in namespace.values():
        if isinstance(value, ModuleType):
            if value.__name__ in modules:
                return True
        elif getattr(value, "__module__", None) in modules:
            return True
    return False


def real_part_modules(loaded: Iterable[tuple[str, ModuleType]]) -> set[str]:
    """`tests.real_parts` and every test helper module that uses it, directly or through another."""
    helpers = {name: module for name, module in loaded if name.startswith("tests") and module is not None}
    found = {REAL_PARTS_MODULE}
    while True:
        more = {name for name, module in helpers.items() if name not in found and _references(vars(module), found)}
        if not more:
            return found
        found |= more


def reaches_real_parts(item: pytest.Item, modules: set[str]) -> bool:
    if item.get_closest_marker("vcsim") is not None:
        return True
    module = getattr(item, "module", None)
    if module is not None and (module.__name__ in modules or _references(vars(module), modules)):
        return True
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        for fixturedef in defs:
            func = fixturedef.func
            if getattr(func, "__module__", None) in modules:
                return True
            owner = sys.modules.get(getattr(func, "__module__", "") or "")
            if owner is not None and _references(vars(owner), modules):
                return True
    return False


def tier_of(item: pytest.Item, modules: set[str], root: str) -> str:
    path = str(item.path)
    relative = path[len(root) + 1 :] if path.startswith(root + "/") else path
    function = getattr(item, "originalname", item.name)
    if relative in SLOW_MODULES or f"{relative}::{function}" in SLOW_MODULES or reaches_real_parts(item, modules):
        return "slow"
    if any(name in SLOW_FIXTURES for name in getattr(item, "fixturenames", ())):
        return "slow"
    return "fast"


def mark_tiers(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each collected test `fast` or `slow` (tests/conftest.py calls this at collection)."""
    modules = real_part_modules(list(sys.modules.items()))
    root = str(config.rootpath)
    for item in items:
        item.add_marker(tier_of(item, modules, root))
