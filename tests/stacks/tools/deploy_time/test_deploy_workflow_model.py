"""Issue 44: the model counts what the shipped program really does (batches serial per switch,
each at most the joins in flight; the plugin's CPU; Check/Diff on the engine's step loop), and
the workflow's engine settings come from the stack and the run's preview."""

from __future__ import annotations

import pytest

from provider.switch_batch import DEFAULT_WINDOW_S
from stacks.environment.pulumi_up import PulumiUpSettings
from stacks.tools.plan.deploy_time.durations import Durations
from stacks.tools.plan.deploy_time.engine import EngineSettings
from stacks.tools.plan.deploy_time.estimate import estimate
from stacks.tools.plan.deploy_time.model import Schedule
from stacks.tools.plan.deploy_time.plugin_limits import PLUGIN_OPS_PER_S, SWITCH_WINDOW_S
from stacks.tools.plan.deploy_time.workflow import (
    cli_default_engine,
    create_only,
    deploy_parallel,
    plan_width,
    preview_ops,
    workflow_engine,
)

D = Durations()


def _member(i: int, switch: str = "dvs-1") -> dict[str, object]:
    return {
        "urn": f"urn:member:{i}",
        "type": "gpucluster:vsphere:DvsHostMember",
        "name": f"member-{i}",
        "custom": True,
        "dependencies": [],
        "inputs": {"switch_uuid": switch, "host_name": f"h{i}"},
    }


def test_the_models_window_is_the_plugins() -> None:
    assert SWITCH_WINDOW_S == DEFAULT_WINDOW_S


def test_batches_of_one_switch_run_one_after_another_each_at_most_the_joins_in_flight() -> None:
    """Old model: one 20-second operation however many hosts and however few slots."""
    members = [_member(i) for i in range(6)]
    narrow = EngineSettings(provider_host="plugin", switch_joins="batched", parallel=2, backend="cloud")

    result = estimate(members, D, narrow)

    assert result.pulumi_up.seconds == 3 * (D.switch_member + SWITCH_WINDOW_S)
    [term] = [t for t in result.terms if t.name == "switch joins"]
    assert term.floor_seconds == 3 * (D.switch_member + SWITCH_WINDOW_S)
    assert "batches of at most 2" in term.detail


def test_the_plugins_rate_is_a_floor_of_its_one_process_that_a_larger_runner_does_not_lower() -> None:
    """Issue 52 item 3: the plugin is one Python process (one interpreter lock, one pool); the old
    model divided its floor by the runner's CPUs."""
    many = [_member(i, f"dvs-{i}") for i in range(1000)]  # one host per switch: no batching limit
    two = EngineSettings(
        provider_host="plugin", switch_joins="batched", parallel=1000, executor=1000, runner_cpus=2, backend="cloud"
    )
    four = EngineSettings(
        provider_host="plugin", switch_joins="batched", parallel=1000, executor=1000, runner_cpus=4, backend="cloud"
    )

    on_two, on_four = estimate(many, D, two), estimate(many, D, four)

    assert on_two.pulumi_up.seconds == pytest.approx(1000 / PLUGIN_OPS_PER_S)
    assert on_four.pulumi_up.seconds == pytest.approx(1000 / PLUGIN_OPS_PER_S)
    names = {t.name for t in on_two.terms}
    assert {"plugin CPU", "Check/Diff"} <= names


@pytest.mark.parametrize(
    ("summary", "skip"),
    [
        ({"create": 40, "same": 3}, True),
        ({"create": 40, "update": 1}, False),
        ({"create": 40, "replace": 1}, False),
        ({"create": 40, "delete": 1}, False),
        ({"create-replacement": 1, "delete-replaced": 1}, False),
        ({"same": 80}, False),
        ({"create": 2, "read": 1}, True),
    ],
)
def test_checkpoints_are_skipped_only_for_a_create_only_preview(summary: dict[str, int], skip: bool) -> None:
    assert create_only(preview_ops({"changeSummary": summary}))[0] is skip


def test_without_a_summary_the_steps_are_counted() -> None:
    steps = {"steps": [{"op": "create"}, {"op": "create"}, {"op": "replace"}]}
    assert preview_ops(steps) == {"create": 2, "replace": 1}
    assert create_only(preview_ops(steps))[0] is False


def test_parallel_is_the_stacks_or_the_plans_width_never_below_the_clis_default() -> None:
    assert deploy_parallel(PulumiUpSettings(parallel=300), 5000) == 300
    assert deploy_parallel(PulumiUpSettings.model_validate({"runnerCpus": 2}), 900) == 900
    assert deploy_parallel(PulumiUpSettings.model_validate({"runnerCpus": 4}), 3) == 16


def test_the_width_is_the_most_operations_at_one_instant() -> None:
    schedule = Schedule(10, {"a": 0, "b": 1, "c": 2, "d": 9}, {"a": 5, "b": 6, "c": 3, "d": 10}, ())
    assert plan_width(schedule) == 3


def test_the_workflows_settings_differ_from_the_clis_defaults_as_the_workflow_runs() -> None:
    deploy = PulumiUpSettings.model_validate({"runnerCpus": 2, "backend": "s3"})
    run = workflow_engine(deploy, 700, create_only=True)
    assert (run.parallel, run.checkpoints, run.backend, run.provider_host) == (700, "skip", "s3", "plugin")
    assert workflow_engine(deploy, 700, create_only=False).checkpoints == "every-step"
    bare = cli_default_engine(deploy)
    assert (bare.effective_parallel, bare.checkpoints) == (8, "every-step")
