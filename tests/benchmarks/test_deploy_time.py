"""The deployment-time benchmark at CI size: it runs, its figures are consistent, the table lands in place."""

from __future__ import annotations

from pathlib import Path

from benchmarks.deploy_time import BEGIN, END, measure, write_markdown
from stacks.tools.plan.deploy_time.durations import Durations


def test_four_workers_linked_and_full() -> None:
    rows = measure([4], Durations())
    assert [(row.workers, row.linked) for row in rows] == [(4, True), (4, False)]
    linked, full = (row.result for row in rows)
    for result in (linked, full):
        assert result.bound.seconds <= result.pulumi_up.seconds <= result.ready.seconds
    # Five VMs fit vCenter's units at once: nothing queues, the estimate is the bound.
    assert linked.ratio == 1.0
    assert full.pulumi_up.seconds - linked.pulumi_up.seconds == Durations().full_clone - Durations().linked_clone


def test_the_table_replaces_only_its_own_block(tmp_path: Path) -> None:
    rows = measure([4], Durations())
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(f"# Benchmarks\n\nbefore\n\n{BEGIN}\nold table\n{END}\n\nafter\n")
    write_markdown(rows, path)
    text = path.read_text()
    assert "old table" not in text
    assert text.startswith("# Benchmarks\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert "| 4 | linked |" in text and "| 4 | full |" in text
