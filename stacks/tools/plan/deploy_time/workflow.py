"""The engine settings the deploy workflow runs `pulumi up` with, from the stack's `pulumiUp` keys
and the plan (stacks/environment/deploy.py; .github/workflows/deploy.yml runs
`python -m stacks deploy-settings`), and the CLI's defaults beside them.

- `--parallel`: `pulumiUp.parallel`, or the plan's width (the most operations that overlap in
  vCenter's bound: more slots than that never run), never below the CLI's own default
  (4 x the runner's CPUs: pulumi/pulumi pkg/cmd/pulumi/operations/up.go, `defaultParallel`).
- Checkpoints: skipped (`PULUMI_SKIP_CHECKPOINTS=true`, pulumi/pulumi sdk/go/common/env/env.go:
  "Skip saving state checkpoints and only save the final deployment") only for a run whose
  preview shows creates and nothing replaced, updated or deleted: an interrupted create-only run
  is undone by `python -m stacks recover` and `pulumi import`; an interrupted replacement would
  leave its new VM orphaned and its old one in a state the saved checkpoint does not know. Never
  on Pulumi Cloud, which journals each step: there `PULUMI_SKIP_CHECKPOINTS` only switches the
  journaler to its unsafe loop (pulumi/pulumi pkg/backend/journal.go) and gains nothing.
- Timeouts: the run interrupts itself (one SIGINT) after twice the estimate of what this run
  changes, at least 30 minutes; Pulumi then starts no new step, lets the ones in flight end and
  saves the final state (pulumi/pulumi pkg/backend/cancellation_scope.go: the first SIGINT or
  SIGTERM cancels, the second terminates). The step's own timeout leaves that its time after the
  interrupt: GitHub's step timeout sends SIGINT and SIGTERM 7.5 s apart, which terminates Pulumi
  before a skipped-checkpoint run's only save.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from stacks.environment.pulumi_up import PulumiUpSettings
from stacks.tools.plan.deploy_time.engine import PARALLEL_PER_CPU, SHIPPED, EngineSettings
from stacks.tools.plan.deploy_time.model import Schedule

CREATE_ONLY_OPS = frozenset({"create", "same", "read"})
"""Preview step kinds a create-only run may show (`pulumi preview --json`, `changeSummary` and
`steps[].op`: pulumi/pulumi sdk/go/common/apitype `OpType`). Anything else keeps the checkpoints."""


def plan_width(*schedules: Schedule) -> int:
    """The most operations running at one instant in any of `schedules` (vCenter's bound, and
    vCenter's schedule with unbounded `--parallel`, where queueing makes more overlap)."""
    peak = 1
    for schedule in schedules:
        timed = [
            (start, schedule.end[key]) for key, start in schedule.start.items() if schedule.end.get(key, start) > start
        ]
        events = sorted([(start, 1) for start, _ in timed] + [(end, -1) for _, end in timed])
        running = 0
        for _, step in events:
            running += step
            peak = max(peak, running)
    return peak


def workflow_lines(resources: Any, deploy: PulumiUpSettings) -> tuple[list[str], dict[str, Any]]:
    """What `plan` prints about the deploy workflow's run of this plan (a first deploy: creates
    only) beside a bare `pulumi up` on the same runner, and the same as data."""
    from stacks.tools.plan.deploy_time.durations import resources_from_plan
    from stacks.tools.plan.deploy_time.engine import save_seconds, state_bytes
    from stacks.tools.plan.deploy_time.estimate import estimate
    from stacks.tools.plan.deploy_time.words import format_seconds

    types = [r.type for r in resources_from_plan(resources)]
    vcenter = estimate(resources, None, None)
    width = plan_width(vcenter.bound, vcenter.pulumi_up)
    chosen = estimate(resources, None, workflow_engine(deploy, width, create_only=True))
    bare = estimate(resources, None, cli_default_engine(deploy))
    kept = estimate(resources, None, workflow_engine(deploy, width, create_only=False))
    lines = [
        f"deploy workflow (a first deploy, creates only): pulumi up {format_seconds(chosen.pulumi_up.seconds)} "
        f"({chosen.ratio:.2f}x) with {workflow_engine(deploy, width, create_only=True).describe()}",
        f"  a first deploy with its checkpoints kept: {format_seconds(kept.pulumi_up.seconds)}; a change to the "
        f"running stack keeps them and costs its own steps only, each changed step two saves of the whole state "
        f"({2 * save_seconds(state_bytes(types), deploy.backend):.1f} s): `deploy-settings` estimates "
        "it from the run's preview",
        f"  the CLI's defaults on the same runner: {format_seconds(bare.pulumi_up.seconds)} ({bare.ratio:.2f}x) with "
        f"{cli_default_engine(deploy).describe()}",
    ]
    data = {
        "width": width,
        "parallel": deploy_parallel(deploy, width),
        "runnerCpus": deploy.runner_cpus,
        "workflowSeconds": round(chosen.pulumi_up.seconds, 1),
        "cliDefaultsSeconds": round(bare.pulumi_up.seconds, 1),
        "checkpointsKeptSeconds": round(kept.pulumi_up.seconds, 1),
    }
    return lines, data


def deploy_parallel(deploy: PulumiUpSettings, width: int) -> int:
    if deploy.parallel is not None:
        return deploy.parallel
    return max(PARALLEL_PER_CPU * deploy.runner_cpus, width)


def workflow_engine(deploy: PulumiUpSettings, width: int, *, create_only: bool) -> EngineSettings:
    """What deploy.yml runs: the program as shipped, the stack's `--parallel`, checkpoints
    skipped for a create-only run."""
    return replace(
        SHIPPED,
        runner_cpus=deploy.runner_cpus,
        parallel=deploy_parallel(deploy, width),
        backend=deploy.backend,
        checkpoints="skip" if create_only and deploy.backend != "cloud" else "every-step",
    )


def cli_default_engine(deploy: PulumiUpSettings) -> EngineSettings:
    """A bare `pulumi up` on the same runner: `--parallel` 4 x CPUs, a checkpoint per step."""
    return replace(SHIPPED, runner_cpus=deploy.runner_cpus, parallel=None, backend=deploy.backend)


def preview_ops(preview: Mapping[str, Any]) -> dict[str, int]:
    """Step counts per kind from a `pulumi preview --json` document (its `changeSummary`, or
    counted from `steps` when the summary is missing)."""
    summary = preview.get("changeSummary")
    if isinstance(summary, Mapping) and summary:
        return {str(k): int(v) for k, v in summary.items()}
    counts: dict[str, int] = {}
    for step in preview.get("steps") or []:
        op = str(step.get("op", "")) if isinstance(step, Mapping) else ""
        counts[op] = counts.get(op, 0) + 1
    return counts


def checkpoint_decision(ops: Mapping[str, int], backend: str) -> tuple[bool, str]:
    """Whether the run skips its intermediate checkpoints on `backend`, and why in words."""
    if backend == "cloud":
        return False, "Pulumi Cloud journals each step: checkpoints kept (skipping them gains nothing there)"
    return create_only(ops)


INTERRUPT_FLOOR_MINUTES = 30
GRACE_MARGIN_S = 60.0
"""After the interrupt, beyond the longest step in flight and the final save: the program's
shutdown, the plugin's exit and the policy pack's."""


@dataclass(frozen=True)
class Timeouts:
    interrupt_minutes: int
    """When the run sends `pulumi up` one SIGINT: twice the estimate, at least 30 minutes."""
    grace_minutes: int
    """After the interrupt, for the steps in flight to end and the final state to be saved."""

    @property
    def step_minutes(self) -> int:
        """The step's own timeout: past the interrupt and its grace, so GitHub never ends the run first."""
        return self.interrupt_minutes + self.grace_minutes + 1


def timeouts(estimate_s: float, longest_step_s: float, final_save_s: float) -> Timeouts:
    return Timeouts(
        interrupt_minutes=max(INTERRUPT_FLOOR_MINUTES, math.ceil(2 * estimate_s / 60)),
        grace_minutes=math.ceil((longest_step_s + final_save_s + GRACE_MARGIN_S) / 60),
    )


def create_only(ops: Mapping[str, int]) -> tuple[bool, str]:
    """Whether the run may skip its checkpoints, and why in words."""
    others = {op: n for op, n in ops.items() if n and op not in CREATE_ONLY_OPS}
    if others:
        listed = ", ".join(f"{n} {op}" for op, n in sorted(others.items()))
        return False, f"the preview shows {listed}: keeping a checkpoint per step"
    if not ops.get("create"):
        return False, "the preview shows no create: nothing to gain, keeping a checkpoint per step"
    return True, f"the preview shows only creates ({ops['create']}): intermediate checkpoints skipped"
