"""The deployment-time model on small hand-made graphs whose answer is known, then on real plans."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stacks.tools.plan.deploy_time.durations import TEMPLATE_HOST, Durations, load_durations
from stacks.tools.plan.deploy_time.estimate import estimate
from stacks.tools.plan.deploy_time.model import CycleError, Operation, critical_path_bound, simulate
from tests.stack_fixtures import fixture_project_dir

ROOT = Path(__file__).resolve().parents[4]


def op(key: str, seconds: float, *deps: str, holds: dict[str, int] | None = None, engine: bool = True) -> Operation:
    return Operation(key, key, seconds, deps, holds or {}, engine_slot=engine, kind=key)


def test_a_chain_takes_the_sum_and_is_its_own_critical_path() -> None:
    ops = [op("a", 10), op("b", 5, "a"), op("c", 1, "b")]
    assert critical_path_bound(ops).seconds == 16
    schedule = simulate(ops)
    assert schedule.seconds == 16
    assert schedule.critical_path == ("a", "b", "c")
    assert (schedule.start["b"], schedule.end["b"]) == (10, 15)


def test_a_diamond_waits_for_its_longer_branch() -> None:
    ops = [op("a", 1), op("slow", 10, "a"), op("fast", 3, "a"), op("d", 1, "slow", "fast")]
    bound = critical_path_bound(ops)
    assert bound.seconds == 12
    assert bound.critical_path == ("a", "slow", "d")
    assert simulate(ops).seconds == 12


def test_engine_parallelism_serialises_independent_operations() -> None:
    ops = [op("x", 5), op("y", 5), op("z", 5)]
    assert critical_path_bound(ops).seconds == 5
    assert simulate(ops).seconds == 5  # unbounded: Pulumi's default
    assert simulate(ops, parallel=2).seconds == 10
    assert simulate(ops, parallel=1).seconds == 15


def test_guest_work_does_not_take_an_engine_slot() -> None:
    ops = [op("a-vm", 5), op("boot", 20, "a-vm", engine=False), op("b-other", 5)]
    assert simulate(ops, parallel=1).seconds == 25  # vm, then other while the guest boots


def test_a_capacity_queues_clones_in_waves() -> None:
    clones = [op(f"clone-{i}", 10, holds={TEMPLATE_HOST: 1}) for i in range(5)]
    assert critical_path_bound(clones).seconds == 10
    schedule = simulate(clones, capacity={TEMPLATE_HOST: 2})
    assert schedule.seconds == 30  # 2 + 2 + 1
    assert sorted(schedule.start.values()) == [0, 0, 10, 10, 20]
    assert len(schedule.critical_path) == 3  # each wave waited for one of the one before


def test_capacity_units_add_up() -> None:
    ops = [op("big", 10, holds={"host:h": 3}), op("small", 10, holds={"host:h": 2})]
    assert simulate(ops, capacity={"host:h": 4}).seconds == 20
    assert simulate(ops, capacity={"host:h": 5}).seconds == 10


def test_a_cycle_is_refused() -> None:
    with pytest.raises(CycleError):
        critical_path_bound([op("a", 1, "b"), op("b", 1, "a")])
    with pytest.raises(CycleError):
        simulate([op("a", 1, "b"), op("b", 1, "a")])


def test_an_operation_larger_than_its_capacity_is_refused() -> None:
    with pytest.raises(ValueError, match="holds 3"):
        simulate([op("a", 1, holds={"host:h": 3})], capacity={"host:h": 2})


def _vm(name: str, *, linked: bool, host: str) -> dict[str, object]:
    return {
        "urn": f"urn:vm:{name}",
        "type": "vsphere:index/virtualMachine:VirtualMachine",
        "name": name,
        "custom": True,
        "dependencies": [],
        "inputs": {"clone": {"linkedClone": linked}, "hostSystemId": host, "datastoreId": "ds-1"},
    }


def test_clones_share_the_template_hosts_units() -> None:
    d = Durations(linked_clone=20, full_clone=100, power_on=0, host_units=4, full_clone_units=2)
    linked = [_vm(f"w{i}", linked=True, host=f"h{i}") for i in range(8)]
    assert estimate(linked, d, engine=None).pulumi_up.seconds == 40  # 4 units, 1 each: two waves
    assert estimate(linked, d, engine=None).bound.seconds == 20
    full = [_vm(f"w{i}", linked=False, host=f"h{i}") for i in range(4)]
    assert estimate(full, d, engine=None).pulumi_up.seconds == 200  # 2 units each: two at a time


def _copy(host: str, *, linked: bool = True) -> dict[str, object]:
    return {
        "urn": f"urn:copy:{host}",
        "type": "gpucluster:vsphere:TemplateReplica",
        "name": f"copy-{host}",
        "custom": True,
        "dependencies": [],
        "inputs": {"linked": linked, "host_id": host, "datastore_id": "ds-1"},
    }


def _from_copy(vm: dict[str, object], host: str) -> dict[str, object]:
    return {**vm, "dependencies": [f"urn:copy:{host}"]}


def test_clones_from_template_copies_use_the_copies_hosts_units() -> None:
    d = Durations(linked_clone=20, full_clone=100, power_on=0, snapshot=5, host_units=4)
    # Two copies, each serving three workers on other hosts: 3 units on each copy's host, one wave.
    copies = [_copy("c1"), _copy("c2")]
    workers = [_from_copy(_vm(f"w{i}", linked=True, host=f"h{i}"), "c1" if i < 3 else "c2") for i in range(6)]
    result = estimate([*copies, *workers], d, engine=None)
    assert result.pulumi_up.seconds == 25 + 20  # the copies (clone + snapshot) then one wave of clones
    assert result.bound.seconds == 45
    assert result.kinds["urn:copy:c1"] == "template copy (linked)"
    # The same six workers from the template: 4 units, two waves.
    assert estimate([_vm(f"w{i}", linked=True, host=f"h{i}") for i in range(6)], d, engine=None).pulumi_up.seconds == 40


def test_a_clone_onto_its_copys_own_host_takes_units_on_both_sides() -> None:
    d = Durations(linked_clone=20, power_on=0, snapshot=0, host_units=4)
    # Copy c1 runs on h0; three clones from it plus the one landing on h0: 3 + 2 = 5 units > 4.
    vms = [_from_copy(_vm(f"w{i}", linked=True, host="c1" if i == 0 else f"h{i}"), "c1") for i in range(4)]
    assert estimate([_copy("c1"), *vms], d, engine=None).pulumi_up.seconds == 20 + 20 + 20


def test_a_copy_of_a_copy_takes_its_units_on_its_parent_copys_host() -> None:
    d = Durations(linked_clone=20, power_on=0, snapshot=5, host_units=4)
    # c1 from the template; c2..c5 from c1, each 1 unit on c1's host and 1 on its own.
    children = [{**_copy(f"c{i}"), "dependencies": ["urn:copy:c1"]} for i in range(2, 6)]
    template_clones = [_vm(f"t{i}", linked=True, host=f"h{i}") for i in range(4)]
    result = estimate([_copy("c1"), *children, *template_clones], d, engine=None)
    # The template's host has c1 and four VMs (5 units of 4: the last VM at 20-40 s); the children
    # run on c1's host at 25-50 s. Charged to the template's host, one would wait until 40 s.
    assert result.pulumi_up.seconds == 50
    assert all(result.pulumi_up.start[f"urn:copy:c{i}"] == 25 for i in range(2, 6))


def test_durations_file_overrides_and_refuses_typos(tmp_path: Path) -> None:
    good = tmp_path / "d.yaml"
    good.write_text("linked_clone: 5\nparallel: 10\n")
    assert load_durations(good) == Durations(linked_clone=5, parallel=10)
    bad = tmp_path / "bad.yaml"
    bad.write_text("linked_clones: 5\n")
    with pytest.raises(ValueError, match="unknown duration"):
        load_durations(bad)


NO_ENGINE_LIMITS = (
    *("--provider-host", "plugin", "--executor", "1000", "--switch-joins", "batched"),
    *("--parallel", "1000", "--checkpoints", "skip"),
)
"""The engine's terms out of the way: what is left is vCenter's (issue 31's plugin design, generous)."""


def test_plan_json_carries_the_estimate(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stacks", "plan", "dev", "--out", str(tmp_path), "--json", *NO_ENGINE_LIMITS],
        cwd=fixture_project_dir(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    deployment = json.loads(result.stdout)["deployment"]
    assert deployment["inWords"].startswith("deployment: about 6 minutes until `pulumi up` returns")
    assert deployment["boundSeconds"] <= deployment["pulumiUpSeconds"] <= deployment["readyForTrainingSeconds"]
    path = deployment["criticalPath"]
    # What a fresh dev deployment waits for: the control plane's clone, its boot and init, then a
    # worker's join (`pulumi up` waits for every node's, components/k8s/join/joined.py).
    assert path[1].startswith("linked clone + power-on: control-plane-")
    assert any(step.startswith("guest boot + kubeadm init") for step in path)
    assert any(step.startswith("wait for node join: joined-worker-") for step in path)
    engine = deployment["engine"]
    assert engine["settings"]["providerHost"] == "plugin" and engine["settings"]["parallel"] == 1000
    assert engine["vcenterOnlySeconds"] == deployment["boundSeconds"]
    assert {term["term"] for term in engine["terms"]} == {
        "provider host",
        "switch joins",
        "--parallel",
        "checkpoints",
        "plugin CPU",
        "Check/Diff",
    }


def test_plan_refuses_a_bad_durations_file_before_planning(tmp_path: Path) -> None:
    bad = tmp_path / "d.json"
    bad.write_text('{"linked_clone": "fast"}')
    result = subprocess.run(
        [sys.executable, "-m", "stacks", "plan", "dev", "--out", str(tmp_path / "out"), "--durations", str(bad)],
        cwd=fixture_project_dir(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: --durations: ")
    assert "must be numbers" in result.stderr
    assert not (tmp_path / "out").exists()


# --- the estimate in words (issue 25, item 5) ------------------------------------------------------


def test_plan_says_the_estimate_in_words_before_the_bound_ratio(tmp_path: Path) -> None:
    """Dev: a person reads the time and what it waits for first; the model's figures come after."""
    result = subprocess.run(
        [sys.executable, "-m", "stacks", "plan", "dev", "--out", str(tmp_path), *NO_ENGINE_LIMITS],
        cwd=fixture_project_dir(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    [words] = [i for i, line in enumerate(lines) if line.startswith("deployment: ")]
    assert lines[words] == (
        "deployment: about 6 minutes until `pulumi up` returns, about 6 until the GPU workers can train; "
        "longest path: linked clone -> boot -> kubeadm init -> node join"
    )
    [ratio] = [i for i, line in enumerate(lines) if "bound" in line and "x" in line]
    assert ratio == words + 1
    # 6m04s: the scrub no longer waits for the last join (issue 40 item 6), so it left the path.
    assert "pulumi up 6m04s, bound 6m04s (1.00x: nothing queues" in lines[ratio]


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(20, "under a minute"), (75, "about 1 minute"), (150, "about 3 minutes"), (309, "about 5 minutes"), (1482, "about 25 minutes"),
     (5400, "about 1.5 hours"), (7300, "about 2 hours")],
)  # fmt: skip
def test_about(seconds: float, words: str) -> None:
    from stacks.tools.plan.deploy_time.words import about

    assert about(seconds) == words


def test_a_queued_path_is_said_in_waves() -> None:
    """Prod-shaped: three full clones one after another on the template's host, then small steps."""
    from stacks.tools.plan.deploy_time.words import path_in_words

    kinds = [("folder", 2), *[("full clone + power-on", 490)] * 3, ("drs rule", 5), ("drs rule", 5)]
    assert path_in_words(kinds) == "3 x full clone"
