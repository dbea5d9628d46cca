"""Issue 44: every `pulumi up` the project ships runs with the settings its estimate assumes.

deploy.yml: each `pulumi up` step takes `--parallel` from the stack (the `engine` step's
`deploy-settings` output), skips checkpoints only through that step's create-only guard, interrupts
itself (SIGINT) at a time from the estimate and has a step timeout past that interrupt and its
grace, inside a job with room for it (issue 52), and a failed or cancelled run that
skipped them runs `recover` and keeps its import file. README and docs/deploy.md: no bare
`pulumi up` in their commands; they run `scripts/up.sh`, which does the same."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / ".github" / "workflows" / "deploy.yml"
ENGINE = "steps.engine.outputs"


def _jobs() -> dict[str, Any]:
    return dict(yaml.safe_load(DEPLOY.read_text())["jobs"])


def _up_jobs() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name, job in _jobs().items():
        for step in job.get("steps", []):
            uses = str(step.get("uses", ""))
            run = str(step.get("run", ""))
            if (uses.startswith("pulumi/actions@") and (step.get("with") or {}).get("command") == "up") or re.search(
                r"\bpulumi up\b", run
            ):
                found.append((name, job))
                break
    return found


def test_the_deploy_workflow_has_one_up_job_for_every_stack_of_the_order() -> None:
    (name, job), = _up_jobs()
    assert name == "up"
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.order.outputs.stacks) }}"
    assert job["env"]["STACK"] == "${{ matrix.stack }}"  # what the run scripts below name as "$STACK"


@pytest.mark.parametrize(("name", "job"), _up_jobs(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_pulumi_up_runs_with_the_stacks_settings_and_the_create_only_guard(name: str, job: dict[str, Any]) -> None:
    steps = job["steps"]
    ups = [i for i, s in enumerate(steps) if re.search(r"\bpulumi up\b", str(s.get("run", "")))]
    assert len(ups) == 1, "one pulumi up per job"
    up = steps[ups[0]]
    engine = [i for i, s in enumerate(steps) if s.get("id") == "engine"]
    assert engine and engine[0] < ups[0], "the engine-settings step runs before pulumi up"
    script = steps[engine[0]]["run"]
    assert job["env"]["STACK"] == "${{ matrix.stack }}"
    stack = '"$STACK"'  # the shell's name for the matrix's stack (a value of the job, never inlined)
    assert f"pulumi preview --stack {stack} --json" in script
    assert re.search(rf"python -m stacks deploy-settings {re.escape(stack)} --preview \S+", script)
    assert '--github-output "$GITHUB_OUTPUT"' in script

    env = up.get("env") or {}
    assert env.get("PARALLEL") == f"${{{{ {ENGINE}.parallel }}}}", "pulumi up without the stack's --parallel"
    # Issue 52: the run interrupts itself once (SIGINT) and is killed only after the grace; GitHub's
    # step timeout (SIGINT, then SIGTERM 7.5 s later: Pulumi terminates) lies past both.
    command = " ".join(up["run"].replace("\\\n", " ").split())
    assert command.startswith(
        'timeout --signal=INT --kill-after="${GRACE_MINUTES}m" "${INTERRUPT_MINUTES}m" '
        f'pulumi up --stack {stack} --parallel "$PARALLEL" --yes --non-interactive'
    ), command
    assert env.get("INTERRUPT_MINUTES") == f"${{{{ {ENGINE}.interrupt-minutes }}}}"
    assert env.get("GRACE_MINUTES") == f"${{{{ {ENGINE}.grace-minutes }}}}"
    # Skipping checkpoints only through the guard: never a literal, never PULUMI_EXPERIMENTAL.
    assert env.get("PULUMI_SKIP_CHECKPOINTS") == f"${{{{ {ENGINE}.skip-checkpoints }}}}"
    for step in steps:
        assert "PULUMI_EXPERIMENTAL" not in (step.get("env") or {}), step.get("name")
        if step is not up:
            assert "PULUMI_SKIP_CHECKPOINTS" not in (step.get("env") or {}), step.get("name")
    assert up.get("timeout-minutes") == f"${{{{ fromJSON({ENGINE}.timeout-minutes) }}}}"
    assert "--job-minutes 360" in script and job["timeout-minutes"] == 360

    after = steps[ups[0] + 1 :]
    recover = [s for s in after if f"python -m stacks recover {stack}" in str(s.get("run", ""))]
    assert recover, "no recover step after pulumi up"
    guard = str(recover[0].get("if", ""))
    assert "failure()" in guard and "cancelled()" in guard and f"{ENGINE}.skip-checkpoints == 'true'" in guard
    kept = [s for s in after if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert kept and kept[0]["with"]["path"].endswith("import.json") and kept[0].get("if") == recover[0]["if"]


def _commands(path: Path) -> list[str]:
    text = path.read_text()
    return [
        line.split("  #")[0].strip()
        for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.DOTALL)
        for line in block.splitlines()
    ]


@pytest.mark.parametrize("doc", ["README.md", "docs/deploy.md"])
def test_the_documented_path_runs_pulumi_up_the_same_way(doc: str) -> None:
    commands = _commands(ROOT / doc)
    bare = [c for c in commands if re.search(r"(^|\s)pulumi up\b", c) and "--parallel" not in c]
    assert bare == [], f"{doc}: pulumi up without the stack's --parallel: {bare}"
    skipped = [c for c in commands if "PULUMI_SKIP_CHECKPOINTS" in c or "PULUMI_EXPERIMENTAL" in c]
    assert skipped == [], f"{doc}: checkpoints skipped without the create-only guard: {skipped}"
    assert any(c.startswith("bash scripts/up.sh ") for c in commands), f"{doc}: no scripts/up.sh"


def test_the_script_runs_the_workflows_steps() -> None:
    script = (ROOT / "scripts" / "up.sh").read_text()
    assert 'pulumi preview --stack "$stack" --json' in script
    assert "python -m stacks deploy-settings" in script
    assert 'PULUMI_SKIP_CHECKPOINTS="$skip" pulumi up --stack "$stack" --parallel "$parallel"' in script
    assert "PULUMI_EXPERIMENTAL" not in script
