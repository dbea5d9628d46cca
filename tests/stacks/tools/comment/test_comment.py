"""`python -m stacks comment STACK`: the pull request's plan section, rendered locally by
scripts/plan_comment.py's own `render` (issue 55 item 4: the local command sits in
`python -m stacks --help`, not only in a paragraph of docs/environments.md). It must say what the
workflow says: the golden sections of tests/workflow/plan_comments/ and the same verdict status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[4]
GOLDEN = PROJECT / "tests" / "workflow" / "plan_comments"


def _comment(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # From another folder than the project's: the command finds its project itself.
    return subprocess.run(
        [sys.executable, "-m", "stacks", "comment", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
    )


@pytest.mark.parametrize(("case", "status"), [("scale-out-two", 0), ("pod-cidr-change", 1)])
def test_the_comment_command_renders_the_workflows_section(tmp_path: Path, case: str, status: int) -> None:
    out = tmp_path / "out"
    argv = ["dev", "--file", str(GOLDEN / f"{case}.yaml"), "--against", str(GOLDEN / "base.yaml"), "--out", str(out)]
    result = _comment(tmp_path, *argv)
    assert result.returncode == status, result.stderr
    if case == "scale-out-two":
        assert result.stdout == (GOLDEN / f"{case}.md").read_text()
    else:
        assert "**This check fails until the rebuild is a reviewed decision.**" in result.stdout
        assert "    accept-rebuild: dev kubernetes.podCidr" in result.stdout
    assert (out / "section.md").read_text() == result.stdout


def test_an_accept_line_of_the_description_file_is_taken(tmp_path: Path) -> None:
    description = tmp_path / "description.txt"
    description.write_text("Moves the pod range.\n\naccept-rebuild: dev kubernetes.podCidr\n")
    argv = ["dev", "--file", str(GOLDEN / "pod-cidr-change.yaml"), "--against", str(GOLDEN / "base.yaml")]
    result = _comment(tmp_path, *argv, "--description", str(description), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "**Verdict: refused**" not in result.stdout


def test_a_missing_stack_file_is_one_line_not_a_deleted_stack(tmp_path: Path) -> None:
    result = _comment(tmp_path, "dev", "--file", str(tmp_path / "gone.yaml"), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'gone.yaml'}: no such stack file"
