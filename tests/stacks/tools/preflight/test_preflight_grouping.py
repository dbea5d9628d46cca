"""Preflight's grouped lines (stacks/tools/preflight/checks/report.py `grouped`), on the hand-built
inventory snapshots of test_preflight_offline.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stacks.environment.loader import load_environment, read_stack_file
from stacks.tools.preflight.checks import check
from tests.stack_fixtures import fixture_stack

from .test_preflight_offline import ENV, _inventory


@pytest.fixture
def dev_env():
    return load_environment(read_stack_file(fixture_stack("dev")))


def test_identical_findings_on_every_host_and_slot_are_one_line(dev_env) -> None:
    """Issue 54 item 5: a profile no host offers, two per worker, was one BLOCKER per host per slot
    (12 near-identical lines on 6 hosts); now one line naming every host and slot."""
    env = dev_env.model_copy(
        update={"gpu_workers": dev_env.gpu_workers.model_copy(update={"vgpu_profiles": ["grid_t4-8c", "grid_t4-8c"]})}
    )
    blockers = [f.render() for f in check(env, _inventory()) if f.level == "BLOCKER" and "gpuTemplate" not in f.key]
    hosts = ", ".join(f"'{h.name}'" for h in env.hosts)
    assert blockers == [
        f"BLOCKER {ENV}.gpuWorkers.vgpuProfiles[0,1]: each of hosts {hosts} does not offer vGPU profile "
        "'grid_t4-8c' (offered: grid_t4-16c)"
    ]


def test_different_findings_stay_apart(dev_env) -> None:
    inv = _inventory()
    first = next(iter(inv.hosts))
    inv.hosts[first] = replace(inv.hosts[first], vgpu_profiles=("grid_t4-4c",))
    blockers = [f.render() for f in check(dev_env, inv) if f.level == "BLOCKER"]
    assert len(blockers) == 1 and f"host '{first}' does not offer" in blockers[0]
