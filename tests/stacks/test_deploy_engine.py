"""The engine's terms of the deployment model (issue 31): provider threads, switch joins,
`--parallel` and checkpoints change the estimate the way the engine and our providers behave."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stacks.tools.plan.deploy_time import engine
from stacks.tools.plan.deploy_time.durations import Durations
from stacks.tools.plan.deploy_time.engine import EngineSettings, save_seconds
from stacks.tools.plan.deploy_time.estimate import estimate, summary_lines
from stacks.tools.plan.deploy_time.model import Operation, simulate
from stacks.tools.plan.deploy_time.plugin_limits import SWITCH_WINDOW_S
from tests.stack_fixtures import fixture_project_dir

ROOT = Path(__file__).resolve().parents[2]
D = Durations()
NO_SAVES = {"backend": "cloud"}


def op(
    key: str, seconds: float, *, pool: str = "", holds: dict[str, int] | None = None, engine_slot: bool = True
) -> Operation:
    return Operation(key, key, seconds, (), holds or {}, engine_slot=engine_slot, kind=key, pool=pool)


def test_a_pool_runs_its_size_at_once() -> None:
    ops = [op(f"d{i}", 10, pool="provider") for i in range(8)]
    assert simulate(ops, capacity={"provider": 4}).seconds == 20
    assert simulate(ops, parallel=16, capacity={"provider": 4}).seconds == 20


def test_an_operation_waiting_for_a_provider_thread_keeps_its_engine_slot() -> None:
    # Four calls queue in a one-thread provider and hold the engine's four slots: the clone that
    # needs no provider thread waits for a slot, as the engine's step workers are all busy.
    ops = [*(op(f"d{i}", 10, pool="provider") for i in range(4)), op("z-clone", 10)]
    schedule = simulate(ops, parallel=4, capacity={"provider": 1})
    assert schedule.start["z-clone"] == 10
    assert schedule.seconds == 40


def _member(i: int, switch: str = "dvs-1") -> dict[str, object]:
    return {
        "urn": f"urn:member:{i}",
        "type": engine.SWITCH_MEMBERS[1],
        "name": f"member-{i}",
        "custom": True,
        "dependencies": [],
        "inputs": {"switch_uuid": switch, "host_name": f"h{i}"},
    }


def _graphics(i: int) -> dict[str, object]:
    return {
        "urn": f"urn:graphics:{i}",
        "type": "gpucluster:vsphere:HostGraphicsMode",
        "name": f"graphics-{i}",
        "custom": True,
        "dependencies": [],
        "inputs": {},
    }


def test_serial_switch_joins_take_one_after_another_per_switch() -> None:
    members = [_member(i) for i in range(6)] + [_member(i, "dvs-2") for i in range(6, 8)]
    wide = {"provider_host": "plugin", "executor": 64, "parallel": 64, **NO_SAVES}
    serial = estimate(members, D, EngineSettings(switch_joins="serial", **wide))
    batched = estimate(members, D, EngineSettings(switch_joins="batched", **wide))
    assert serial.pulumi_up.seconds == 6 * D.switch_member
    # One batch per switch, after the plugin's gathering window (provider/switch_batch.py).
    assert batched.pulumi_up.seconds == D.switch_member + SWITCH_WINDOW_S
    [term] = [t for t in serial.terms if t.name == "switch joins"]
    assert term.floor_seconds == 6 * D.switch_member and "8 host joins" in term.detail


def test_a_join_waiting_for_its_switch_keeps_its_provider_thread() -> None:
    # Today: 4 threads. Four joins of one switch take them all (they are ready first) and wait for
    # the switch's lock inside them (components/vsphere/dvs_host_member.py takes it in the thread),
    # so the three graphics changes start only as joins finish: at 20, 40 and 60 s. Were the
    # threads free while joins wait, the graphics changes would run from 0 s and all end at 90 s.
    members = [{**_member(i), "urn": f"urn:a-member:{i}"} for i in range(4)]
    result = estimate([*members, *(_graphics(i) for i in range(3))], D, EngineSettings(parallel=64, **NO_SAVES))
    assert result.pulumi_up.seconds == 3 * D.switch_member + D.host_graphics


def test_the_dynamic_host_caps_concurrency_at_the_measured_four() -> None:
    resources = [_graphics(i) for i in range(8)]
    today = estimate(resources, D, EngineSettings(**NO_SAVES))
    plugin = estimate(resources, D, EngineSettings(provider_host="plugin", executor=8, **NO_SAVES))
    assert engine.DYNAMIC_HOST_CONCURRENCY == 4
    assert today.pulumi_up.seconds == 2 * D.host_graphics
    assert plugin.pulumi_up.seconds == D.host_graphics
    assert today.vcenter is not None and today.vcenter.seconds == D.host_graphics
    assert today.held_back_by is not None and today.held_back_by.name == "provider host"


def test_parallel_defaults_to_four_per_runner_cpu() -> None:
    assert EngineSettings().effective_parallel == 16
    assert EngineSettings(runner_cpus=8).effective_parallel == 32
    assert EngineSettings(runner_cpus=8, parallel=5).effective_parallel == 5
    vms = [
        {
            "urn": f"urn:vm:{i}",
            "type": "vsphere:index/virtualMachine:VirtualMachine",
            "name": f"vm{i}",
            "custom": True,
            "dependencies": [],
            "inputs": {"clone": {"linkedClone": True}, "hostSystemId": f"h{i}", "datastoreId": "ds"},
        }
        for i in range(20)
    ]
    # 20 clones from one template: 8 units on its host (vCenter) against 4 CPUs x 4 (the engine).
    result = estimate(vms, Durations(host_units=100), EngineSettings(runner_cpus=1, **NO_SAVES))
    assert result.pulumi_up.seconds == 5 * (D.linked_clone + D.power_on)
    # A `parallel` in the durations file is the runner's `--parallel`.
    assert estimate(vms, Durations(host_units=100, parallel=20), EngineSettings(**NO_SAVES)).pulumi_up.seconds == 30


def test_checkpoints_per_step_queue_and_skipping_leaves_one_save() -> None:
    resources = [_graphics(i) for i in range(40)]
    wide = {"provider_host": "plugin", "executor": 64, "parallel": 64}
    every = estimate(resources, D, EngineSettings(**wide))
    skip = estimate(resources, D, EngineSettings(checkpoints="skip", **wide))
    cloud = estimate(resources, D, EngineSettings(backend="cloud", **wide))
    state = 40 * engine.measured_bytes_per_type()["pulumi-python:dynamic/vsphere:HostGraphicsMode"]
    [every_term] = [t for t in every.terms if t.name == "checkpoints"]
    assert every_term.floor_seconds == pytest.approx(2 * 40 * save_seconds(state / 2, "file"))
    assert every.pulumi_up.seconds == pytest.approx(D.host_graphics + 2 * save_seconds(state / 2, "file"))
    assert skip.pulumi_up.seconds == pytest.approx(D.host_graphics + save_seconds(state, "file"))
    assert cloud.pulumi_up.seconds == D.host_graphics
    assert save_seconds(state, "s3") > save_seconds(state, "file") > 0


def test_checkpoints_bound_the_run_when_saves_outlast_the_work() -> None:
    resources = [_graphics(i) for i in range(2000)]
    result = estimate(resources, D, EngineSettings(provider_host="plugin", executor=4000, parallel=4000, backend="s3"))
    [term] = [t for t in result.terms if t.name == "checkpoints"]
    assert term.floor_seconds > D.host_graphics
    assert result.pulumi_up.seconds == pytest.approx(term.floor_seconds)
    assert result.held_back_by is not None and result.held_back_by.name == "checkpoints"


def test_plan_prints_each_term_and_the_settings() -> None:
    lines = summary_lines(estimate([_graphics(i) for i in range(8)], D))
    text = "\n".join(lines)
    assert "vCenter's limits alone: 1m30s" in text
    # By default the program as shipped: the gpucluster plugin and its pool, batched joins.
    assert "engine: provider plugin, executor 640, batched switch joins, --parallel 16 (default for 4 CPUs)" in text
    for name in ("provider host", "--parallel", "checkpoints"):
        assert f"    {name} " in text


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("provider_host", "python", "provider_host must be one of dynamic, plugin"), ("executor", 0, "executor must be")],
)
def test_settings_refuse_what_the_engine_has_no_such_thing_as(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EngineSettings(**{field: value})  # type: ignore[arg-type]


def test_plan_refuses_a_runner_without_cpus_before_planning(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stacks", "plan", "dev", "--out", str(tmp_path / "out"), "--runner-cpus", "0"],
        cwd=fixture_project_dir(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --runner-cpus must be a positive count, not 0"
    assert not (tmp_path / "out").exists()


def test_the_plugin_design_counts_the_plugins_own_default_pool() -> None:
    # The model's plugin design is the program as shipped: its executor is the pool the plugin
    # gets when the stack file sets no gpucluster:maxConcurrentOperations.
    from components.gpucluster_resource import DEFAULT_MAX_CONCURRENT_OPERATIONS
    from stacks.tools.plan.deploy_time.engine import DEFAULT_EXECUTOR, PLUGIN_DESIGN

    assert DEFAULT_EXECUTOR == DEFAULT_MAX_CONCURRENT_OPERATIONS == PLUGIN_DESIGN.executor
