"""Issue 44: `python -m stacks deploy-settings` gives the deploy workflow its `--parallel`, its
checkpoint decision (from the run's own preview) and its step timeout, and prints the estimate
for exactly those settings beside the CLI's defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def _run(
    tmp_path: Path, summary: dict[str, int], *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    preview = tmp_path / "preview.json"
    preview.write_text(json.dumps({"steps": [], "changeSummary": summary}))
    output = tmp_path / "github-output"
    output.write_text("")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stacks",
            "deploy-settings",
            "dev",
            "--preview",
            str(preview),
            "--github-output",
            str(output),
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    values = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return done, values


def test_a_create_only_run_skips_checkpoints_and_says_what_the_defaults_would_cost(tmp_path: Path) -> None:
    done, values = _run(tmp_path, {"create": 115})

    assert done.returncode == 0, done.stderr
    assert values["skip-checkpoints"] == "true"
    assert int(values["parallel"]) >= 8  # never below the CLI's default for dev's 2-CPU runner
    assert int(values["timeout-minutes"]) >= 30
    assert f"--parallel {values['parallel']}" in done.stdout
    assert "the CLI's defaults instead:" in done.stdout and "(default for 2 CPUs)" in done.stdout
    assert "final checkpoint only" in done.stdout


def test_a_run_that_updates_or_replaces_keeps_its_checkpoints(tmp_path: Path) -> None:
    done, values = _run(tmp_path, {"create": 3, "replace": 1, "same": 100}, "--job-minutes", "20")

    assert values["skip-checkpoints"] == "false"
    assert "1 replace: keeping a checkpoint per step" in done.stdout
    # A job too short for the step's timeout is refused, naming what to change.
    assert done.returncode == 1
    assert "pulumiUp.runnerCpus" in done.stderr and "Traceback" not in done.stderr


def test_a_preview_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "preview.json"
    bad.write_text("Previewing update (dev)")
    done = subprocess.run(
        [sys.executable, "-m", "stacks", "deploy-settings", "dev", "--preview", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: --preview ") and done.stderr.count("\n") == 1


def test_plan_prints_the_workflows_settings_and_estimate_as_deploy_settings_gives_them(tmp_path: Path) -> None:
    """Where the parts meet: what `plan` says the workflow runs is what `deploy-settings` hands it."""
    _, values = _run(tmp_path, {"create": 115})
    done = subprocess.run(
        [sys.executable, "-m", "stacks", "plan", "dev", "--out", str(tmp_path / "plan"), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    workflow = json.loads(done.stdout)["deployment"]["workflow"]
    assert workflow["parallel"] == int(values["parallel"])
    assert workflow["runnerCpus"] == 2
    assert workflow["workflowSeconds"] <= workflow["checkpointsKeptSeconds"] <= workflow["cliDefaultsSeconds"]
