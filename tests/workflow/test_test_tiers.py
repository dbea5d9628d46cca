"""The test tiers keep their promise (tests/tiers.py, docs/tests.md "Tiers"): a test that reaches
a real program is never in the fast tier, the slow list names tests that exist, and the fast tier
is most of the suite, not a corner of it."""

from __future__ import annotations

import ast
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.tiers import SLOW_FIXTURES, SLOW_MODULES, real_part_modules

ROOT = Path(__file__).resolve().parents[2]


def _module(name: str, **namespace: object) -> types.ModuleType:
    module = types.ModuleType(name)
    vars(module).update(namespace)
    return module


def test_a_helper_that_uses_the_real_parts_rule_counts_through_any_number_of_helpers() -> None:
    def require_program() -> None: ...

    require_program.__module__ = "tests.real_parts"
    real = _module("tests.real_parts", require_program=require_program)
    etcd = _module("tests.k8s.etcd_real", require_program=require_program)

    def start_cluster() -> None: ...

    start_cluster.__module__ = "tests.k8s.etcd_real"
    upgrade = _module("tests.k8s.upgrade_helpers", start_cluster=start_cluster)
    pure = _module("tests.stacks.rules_helpers", sorted=sorted, Path=Path)
    found = real_part_modules(
        [(m.__name__, m) for m in (real, etcd, upgrade, pure)] + [("pytest", pytest), ("other", None)]  # type: ignore[list-item]
    )
    assert found == {"tests.real_parts", "tests.k8s.etcd_real", "tests.k8s.upgrade_helpers"}


def _collected(marker: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", marker, "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return {line.split("[")[0] for line in result.stdout.splitlines() if "::" in line}


@pytest.fixture(scope="module")
def tiers() -> dict[str, set[str]]:
    return {"fast": _collected("fast"), "slow": _collected("slow")}


def _files(tests: set[str]) -> set[str]:
    return {test.split("::")[0] for test in tests}


def test_every_test_is_in_exactly_one_tier(tiers: dict[str, set[str]]) -> None:
    assert not tiers["fast"] & tiers["slow"]
    assert tiers["fast"] and tiers["slow"]
    # The fast tier is the suite's bulk: what it leaves out is the short list of real parts and slow runs.
    assert len(tiers["fast"]) > 2 * len(tiers["slow"])  # test functions, parameters folded


@pytest.mark.parametrize(
    "path",
    [
        "tests/components/k8s/etcd/test_etcd_member.py",  # a real three-member etcd
        "tests/components/k8s/node_bootstrap/test_node_firewall.py",  # nft in network namespaces
        "tests/components/k8s/node_bootstrap/test_bootstrap_real_containerd.py",  # containerd
        "tests/components/vsphere/test_vcsim_template_replica.py",  # the vCenter simulator
        "tests/program/test_cloud_init_schema.py",  # cloud-init's own schema check
        "tests/stacks/tools/images/test_air_gapped_first_boot.py",  # a registry and containerd
    ],
)
def test_a_module_with_a_real_program_is_slow_entirely(tiers: dict[str, set[str]], path: str) -> None:
    assert path in _files(tiers["slow"])
    assert path not in _files(tiers["fast"])


def test_the_pure_rules_and_renderers_are_fast(tiers: dict[str, set[str]]) -> None:
    for path in (
        "tests/stacks/environment/test_rules.py",
        "tests/stacks/environment/test_corpus.py",
        "tests/components/k8s/node_bootstrap/test_bootstrap_script_runs.py",
        "tests/provider/test_internal_keys.py",
    ):
        assert path in _files(tiers["fast"]), path


def test_the_slow_lists_name_what_exists() -> None:
    for entry in SLOW_MODULES:
        path, _, function = entry.partition("::")
        assert (ROOT / path).is_file(), f"tests/tiers.py SLOW_MODULES: no {path}"
        if function:
            names = {n.name for n in ast.walk(ast.parse((ROOT / path).read_text())) if isinstance(n, ast.FunctionDef)}
            assert function in names, f"tests/tiers.py SLOW_MODULES: no {function} in {path}"
    conftests = "".join(p.read_text() for p in (ROOT / "tests").rglob("conftest.py"))
    for fixture in SLOW_FIXTURES:
        assert f"def {fixture}(" in conftests, f"tests/tiers.py SLOW_FIXTURES: no fixture {fixture}"
