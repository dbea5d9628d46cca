"""The deployment-time benchmark at CI size: it runs, its figures are consistent, the tables land in place."""

from __future__ import annotations

from pathlib import Path

from benchmarks.deploy_time import (
    BEGIN,
    END,
    ENGINE_BEGIN,
    ENGINE_END,
    GOAL,
    WORKFLOW_RUNNERS,
    designs,
    measure,
    plan_resources,
    write_markdown,
)
from stacks.environment.pulumi_up import PulumiUpSettings
from stacks.tools.plan.deploy_time.durations import Durations
from stacks.tools.plan.deploy_time.engine import PLUGIN_DESIGN
from stacks.tools.plan.deploy_time.estimate import estimate
from stacks.tools.plan.deploy_time.workflow import cli_default_engine, plan_width, workflow_engine


def test_four_workers_linked_and_full() -> None:
    rows = measure([4], Durations())
    assert [(row.workers, row.linked) for row in rows] == [(4, True), (4, False)]
    linked, full = (row.result for row in rows)
    for result in (linked, full):
        assert result.vcenter is not None
        assert result.bound.seconds <= result.vcenter.seconds <= result.pulumi_up.seconds <= result.ready.seconds
    # Five VMs fit vCenter's units at once: vCenter alone is the bound ...
    assert linked.vcenter is not None and linked.vcenter.seconds == linked.bound.seconds
    # ... and today's engine is what makes it longer: 40 dynamic operations through 4 threads.
    assert linked.pulumi_up.seconds > linked.vcenter.seconds
    assert full.bound.seconds - linked.bound.seconds == Durations().full_clone - Durations().linked_clone


def test_the_plugin_design_removes_the_engines_share_at_four_workers() -> None:
    [linked, _] = measure([4], Durations())
    by_design = {(name, e.engine.describe() if e.engine else ""): e for name, e in linked.engine}
    assert len(by_design) == len(designs(4)) + 2 * len(WORKFLOW_RUNNERS)
    plugin = [e for (name, _), e in by_design.items() if name == "plugin"]
    today = [e for (name, _), e in by_design.items() if name == "today"]
    workflow = [e for (name, _), e in by_design.items() if name.startswith("workflow")]
    assert all(e.ratio <= 1.01 for e in plugin)
    assert all(e.ratio > 1.25 for e in today)
    assert len(workflow) == 2 and all(e.ratio <= 1.01 for e in workflow)


def test_at_512_linked_workers_the_control_planes_clone_no_longer_queues_behind_the_copies() -> None:
    """Issue 31's goal at 512 workers. The template's host made all 35 copies at 8 units, and the
    control plane's clone (its template on that host too) waited ~100 s behind them: vCenter alone
    took 7m52s for a 6m14s bound (1.26x), the plugin design 7m53s (1.27x). The copies fan out as a
    tree (the template makes 7): vCenter alone is the bound, the plugin design within 1.25x."""
    resources = plan_resources(512, linked=True)
    result = estimate(resources, Durations(), PLUGIN_DESIGN)
    assert result.vcenter is not None and result.vcenter.seconds == result.bound.seconds
    control_plane = next(key for key in result.vcenter.start if key.endswith("::control-plane-master"))
    assert result.vcenter.start[control_plane] < Durations().linked_clone  # not after a wave of copies
    assert result.ratio <= GOAL
    # Issue 44: what the deploy workflow runs (the stack's --parallel, checkpoints skipped for a
    # create-only run, s3://) makes the goal on a 2-CPU runner too; the CLI's defaults do not.
    vcenter = estimate(resources, Durations(), engine=None)
    width = plan_width(vcenter.bound, vcenter.pulumi_up)
    two = PulumiUpSettings.model_validate({"runnerCpus": 2, "backend": "s3"})
    assert estimate(resources, Durations(), workflow_engine(two, width, create_only=True)).ratio <= GOAL
    assert estimate(resources, Durations(), cli_default_engine(two)).ratio > 10


def test_the_tables_replace_only_their_own_blocks(tmp_path: Path) -> None:
    rows = measure([4], Durations())
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(
        f"# Benchmarks\n\nbefore\n\n{BEGIN}\nold table\n{END}\n\nmiddle\n\n{ENGINE_BEGIN}\nold\n{ENGINE_END}\n\nafter\n"
    )
    write_markdown(rows, path)
    text = path.read_text()
    assert "old table" not in text and "\nold\n" not in text
    assert text.startswith("# Benchmarks\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert "\n\nmiddle\n\n" in text
    assert "| 4 | linked |" in text and "| 4 | full |" in text
    assert "| 4 | today | dynamic provider host" in text and "| 4 | plugin | provider plugin, executor 640" in text
