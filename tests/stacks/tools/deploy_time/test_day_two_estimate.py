"""Issue 52: a run on a running stack costs its changed steps, not a fresh deploy of every resource.

A `same` step calls no provider operation and writes no checkpoint (pulumi/pulumi
pkg/backend/snapshot.go, `sameSnapshotMutation`); Check and Diff still run for every registration.
Checkpoints are skipped only on a self-managed backend; the timeouts leave the steps in flight and
the final save their time after the run's own interrupt."""

from __future__ import annotations

import pytest

from stacks.tools.plan.deploy_time.durations import Durations
from stacks.tools.plan.deploy_time.engine import EngineSettings, save_seconds, state_bytes
from stacks.tools.plan.deploy_time.estimate import estimate
from stacks.tools.plan.deploy_time.plugin_limits import STEP_LOOP_S
from stacks.tools.plan.deploy_time.preview_steps import changed_in_plan, preview_change
from stacks.tools.plan.deploy_time.workflow import checkpoint_decision, timeouts

D = Durations()
S3_KEPT = EngineSettings(provider_host="plugin", switch_joins="batched", runner_cpus=2, parallel=8, backend="s3")
VM = "vsphere:index/virtualMachine:VirtualMachine"


def _vm(i: int) -> dict[str, object]:
    return {
        "urn": f"urn:pulumi:s::p::{VM}::worker-{i}",
        "type": VM,
        "name": f"worker-{i}",
        "custom": True,
        "dependencies": [],
        "inputs": {"clone": {"linkedClone": True}, "hostSystemId": f"host-{i}", "datastoreId": "ds"},
    }


FLEET = [_vm(i) for i in range(400)]


def _changed(preview: dict[str, object]) -> object:
    fresh = estimate(FLEET, D, None)
    return changed_in_plan(preview_change(preview), FLEET, fresh.seconds)


def test_one_update_among_hundreds_of_same_steps_costs_one_operation_and_two_saves() -> None:
    """Old model: 400 clones through --parallel 8 and 800 saves of the state, whatever the preview."""
    steps = [{"op": "same", "urn": r["urn"]} for r in FLEET[1:]] + [{"op": "update", "urn": FLEET[0]["urn"]}]
    changed = _changed({"steps": steps})

    result = estimate(FLEET, D, S3_KEPT, changed=changed)

    save = save_seconds(state_bytes([VM] * len(FLEET)), "s3")
    [checkpoints] = [t for t in result.terms if t.name == "checkpoints"]
    assert checkpoints.floor_seconds == pytest.approx(2 * save)
    assert result.pulumi_up.seconds == pytest.approx(D.linked_clone + D.power_on + 2 * save)
    # Check and Diff run for every registration, the unchanged ones too.
    [step_loop] = [t for t in result.terms if t.name == "Check/Diff"]
    assert step_loop.floor_seconds == pytest.approx(len(FLEET) * STEP_LOOP_S)
    assert changed.note == "1 of 400 steps change"


def test_a_preview_with_counts_only_stands_the_costliest_operations_in_for_its_changes() -> None:
    changed = _changed({"changeSummary": {"same": 398, "update": 2}})

    assert len(changed.urns) == 2 and changed.steps == 2
    assert "2 the plan cannot name" in changed.note


def test_a_preview_that_creates_everything_costs_what_a_fresh_deploy_does() -> None:
    cloud = EngineSettings(provider_host="plugin", switch_joins="batched", runner_cpus=2, parallel=8, backend="cloud")
    creates = _changed({"steps": [{"op": "create", "urn": r["urn"]} for r in FLEET]})

    assert estimate(FLEET, D, cloud, changed=creates).pulumi_up.seconds == estimate(FLEET, D, cloud).pulumi_up.seconds


@pytest.mark.parametrize(
    ("ops", "backend", "skip"),
    [
        ({"create": 10}, "s3", True),
        ({"create": 10}, "file", True),
        ({"create": 10}, "cloud", False),  # journaling: skipping gains nothing, loses crash safety
        ({"create": 10, "update": 1}, "s3", False),
    ],
)
def test_checkpoints_are_skipped_only_for_creates_on_a_self_managed_backend(
    ops: dict[str, int], backend: str, skip: bool
) -> None:
    assert checkpoint_decision(ops, backend)[0] is skip


def test_the_step_outlasts_the_interrupt_by_the_longest_step_and_the_final_save() -> None:
    limits = timeouts(estimate_s=40 * 60, longest_step_s=490, final_save_s=3)

    assert limits.interrupt_minutes == 80
    assert limits.grace_minutes * 60 >= 490 + 3
    assert limits.step_minutes > limits.interrupt_minutes + limits.grace_minutes
    assert timeouts(60, 30, 1).interrupt_minutes == 30
