"""Issues 44 and 52: `python -m stacks deploy-settings` gives the deploy workflow its `--parallel`,
its checkpoint decision (from the run's own preview and the stack's backend) and its timeouts, and
prints the estimate for exactly those settings beside the CLI's defaults.

Every case runs on a stack file generated here (`benchmarks.stackgen`), never a shipped one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from benchmarks.stackgen import BASE_STACK_FILE, scaled_document
from stacks.environment.loader import ENVIRONMENT_KEY

ROOT = Path(__file__).resolve().parents[4]


def _stack(tmp_path: Path, workers: int, **pulumi_up: Any) -> Path:
    document = scaled_document(yaml.safe_load(BASE_STACK_FILE.read_text()), workers)
    if pulumi_up:
        document["config"][ENVIRONMENT_KEY]["pulumiUp"] = pulumi_up
    path = tmp_path / f"Pulumi.scale{workers}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _run(
    tmp_path: Path, stack: Path, preview: dict[str, Any], *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    preview_file = tmp_path / "preview.json"
    preview_file.write_text(json.dumps(preview))
    output = tmp_path / "github-output"
    output.write_text("")
    name = stack.name.removeprefix("Pulumi.").removesuffix(".yaml")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stacks",
            "deploy-settings",
            name,
            "--file",
            str(stack),
            "--preview",
            str(preview_file),
            "--github-output",
            str(output),
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    values = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return done, values


def _summary(summary: dict[str, int]) -> dict[str, Any]:
    return {"steps": [], "changeSummary": summary}


def test_a_create_only_run_skips_checkpoints_and_says_what_the_defaults_would_cost(tmp_path: Path) -> None:
    done, values = _run(tmp_path, _stack(tmp_path, 4), _summary({"create": 115}))

    assert done.returncode == 0, done.stderr
    assert values["skip-checkpoints"] == "true"
    assert int(values["parallel"]) >= 8  # never below the CLI's default for a 2-CPU runner
    assert int(values["interrupt-minutes"]) >= 30
    assert f"--parallel {values['parallel']}" in done.stdout
    assert "the CLI's defaults instead:" in done.stdout and "(default for 2 CPUs)" in done.stdout
    assert "final checkpoint only" in done.stdout


def test_a_create_only_run_on_pulumi_cloud_keeps_its_checkpoints(tmp_path: Path) -> None:
    """Issue 52 item 1: Pulumi Cloud journals each step; skipping would switch its journaler to the
    unsafe loop (pulumi/pulumi pkg/backend/journal.go) for no gain."""
    done, values = _run(tmp_path, _stack(tmp_path, 4, backend="cloud"), _summary({"create": 115}))

    assert done.returncode == 0, done.stderr
    assert values["skip-checkpoints"] == "false"
    assert "Pulumi Cloud" in done.stdout


def test_a_run_that_updates_or_replaces_keeps_its_checkpoints(tmp_path: Path) -> None:
    done, values = _run(
        tmp_path, _stack(tmp_path, 4), _summary({"create": 3, "replace": 1, "same": 100}), "--job-minutes", "20"
    )

    assert values["skip-checkpoints"] == "false"
    assert "1 replace: keeping a checkpoint per step" in done.stdout
    # A job too short for the step's timeout is refused, naming what to change.
    assert done.returncode == 1
    assert "pulumiUp.runnerCpus" in done.stderr and "Traceback" not in done.stderr


def test_the_step_ends_after_the_interrupt_with_time_for_the_in_flight_steps_and_the_final_save(
    tmp_path: Path,
) -> None:
    """Issue 52 item 2: a GitHub step timeout sends SIGINT, then SIGTERM 7.5 s later, and Pulumi
    terminates on the second signal (pulumi/pulumi pkg/backend/cancellation_scope.go): the run
    interrupts itself first, and the step's own timeout leaves the in-flight steps and the final
    save their time after that."""
    done, values = _run(tmp_path, _stack(tmp_path, 4), _summary({"create": 115}), "--job-minutes", "360")

    assert done.returncode == 0, done.stderr
    interrupt, grace, step = (int(values[k]) for k in ("interrupt-minutes", "grace-minutes", "timeout-minutes"))
    assert grace >= 1 and step > interrupt + grace
    assert f"interrupted (SIGINT) after {interrupt} minutes" in done.stdout


def test_a_one_resource_update_of_a_512_worker_s3_stack_fits_the_job(tmp_path: Path) -> None:
    """Issue 52: 7,769 `same` steps write no checkpoint (pulumi/pulumi pkg/backend/snapshot.go,
    `sameSnapshotMutation`) and run no provider operation: the estimate is the change's, not a
    fresh deploy of every resource."""
    done, values = _run(tmp_path, _stack(tmp_path, 512), _summary({"same": 7769, "update": 1}), "--job-minutes", "360")

    assert done.returncode == 0, done.stderr
    assert values["skip-checkpoints"] == "false"
    assert int(values["timeout-minutes"]) < 60
    assert "1 of 7770 steps change" in done.stdout


def test_a_preview_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "preview.json"
    bad.write_text("Previewing update (dev)")
    stack = _stack(tmp_path, 4)
    done = subprocess.run(
        [sys.executable, "-m", "stacks", "deploy-settings", "scale4", "--file", str(stack), "--preview", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: --preview ") and done.stderr.count("\n") == 1


def test_plan_prints_the_workflows_settings_and_estimate_as_deploy_settings_gives_them(tmp_path: Path) -> None:
    """Where the parts meet: what `plan` says the workflow runs is what `deploy-settings` hands it."""
    stack = _stack(tmp_path, 4)
    _, values = _run(tmp_path, stack, _summary({"create": 115}))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stacks",
            "plan",
            "scale4",
            "--file",
            str(stack),
            "--out",
            str(tmp_path / "plan"),
            "--json",
        ],
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
