"""`python -m stacks deploy-settings STACK --preview preview.json`: the engine settings of this run
of `pulumi up` in the deploy workflow, and the estimate for exactly them.

Reads the stack's `pulumiUp` keys and plans the program under mocks (as `plan` does) for the plan's
width and the estimate; reads the run's own `pulumi preview --json` to decide the checkpoints
and the estimate of what this run changes: only its non-`same` steps cost operations and
checkpoints (stacks/tools/plan/deploy_time/preview_steps.py); workflow.py says when checkpoints are
skipped, and how the timeouts leave the final save its time. Prints one line per decision and the
estimate beside the CLI's defaults; with `--github-output FILE` appends `parallel=`,
`skip-checkpoints=`, `interrupt-minutes=`, `grace-minutes=` and `timeout-minutes=` for the
workflow's next steps.

Exit status: 0; 1 when the estimate does not fit `--job-minutes` (the job would be killed midway:
the line names a runner size or setting that fits); 2 on an invalid stack file or preview document.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from stacks.environment.stack_file import check_stack_file, stack_file_path
from stacks.tools.command_help import command_parser

EXIT_OK = 0
EXIT_TOO_LONG = 1
EXIT_INVALID = 2
MARGIN_MINUTES = 15
"""Room in the job for its set-up (virtualenvs, preview) and, after a failure, `recover`."""


def register(commands: Any) -> None:
    parser = command_parser(
        commands,
        "deploy-settings",
        summary="the engine settings the deploy workflow runs `pulumi up` with, and their estimate",
        description=__doc__ or "",
        needs="offline",
        exit_statuses=None,  # the description's own paragraph
    )
    parser.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml")
    parser.add_argument("--file", help="read this stack file instead of Pulumi.STACK.yaml")
    parser.add_argument("--preview", help="this run's `pulumi preview --json` (without it: a first deploy)")
    parser.add_argument("--github-output", help="append parallel=, skip-checkpoints=, timeout-minutes= here")
    parser.add_argument("--job-minutes", type=int, help="the job's timeout-minutes: refuse an estimate past it")
    parser.set_defaults(func=cmd_deploy_settings)


def cmd_deploy_settings(args: argparse.Namespace) -> int:
    from stacks.environment.loader import load_environment
    from stacks.tools.plan.command import run_plan
    from stacks.tools.plan.deploy_time.durations import resources_from_plan
    from stacks.tools.plan.deploy_time.engine import save_seconds, state_bytes
    from stacks.tools.plan.deploy_time.estimate import estimate
    from stacks.tools.plan.deploy_time.preview_steps import changed_in_plan, preview_change
    from stacks.tools.plan.deploy_time.words import format_seconds
    from stacks.tools.plan.deploy_time.workflow import (
        checkpoint_decision,
        cli_default_engine,
        deploy_parallel,
        plan_width,
        timeouts,
        workflow_engine,
    )

    view, _ = check_stack_file(stack_file_path(args.stack, args.file), args.stack)
    deploy = load_environment(view).pulumi_up
    change = None
    if args.preview:
        try:
            change = preview_change(json.loads(Path(args.preview).read_text()))
        except (OSError, ValueError, TypeError, AttributeError) as error:
            print(f"error: --preview {args.preview}: not a `pulumi preview --json` document ({error})", file=sys.stderr)
            return EXIT_INVALID
    skip, why = checkpoint_decision(change.ops if change else {"create": 1}, deploy.backend)
    run = run_plan(view, stack=args.stack)
    # A first deploy creates every resource; a run on a running stack costs only its changed steps.
    changed = None
    if change is not None:
        fresh = estimate(run.resources, None, None)
        changed = changed_in_plan(change, run.resources, fresh.seconds)
    vcenter = estimate(run.resources, None, None, changed=changed)
    width = plan_width(vcenter.bound, vcenter.pulumi_up)
    parallel = deploy_parallel(deploy, width)
    chosen = estimate(run.resources, None, workflow_engine(deploy, width, create_only=skip), changed=changed)
    defaults = estimate(run.resources, None, cli_default_engine(deploy), changed=changed)
    source = "pulumiUp.parallel" if deploy.parallel is not None else f"the plan's width {width}"
    longest = max((chosen.seconds[key] for key in chosen.pulumi_up.start), default=0.0)
    final_save = save_seconds(state_bytes(r.type for r in resources_from_plan(run.resources)), deploy.backend)
    limits = timeouts(chosen.pulumi_up.seconds, longest, final_save)
    print(f"--parallel {parallel} ({source}; {deploy.runner_cpus} runner CPUs)")
    print(f"checkpoints: {why}")
    print(f"change: {changed.note}" if changed else "change: a first deploy, every resource created")
    print(
        f"estimate: pulumi up {format_seconds(chosen.pulumi_up.seconds)} with these settings "
        f"({chosen.engine.describe() if chosen.engine else ''})"
    )
    print(
        f"  the CLI's defaults instead: {format_seconds(defaults.pulumi_up.seconds)} "
        f"({defaults.engine.describe() if defaults.engine else ''})"
    )
    print(
        f"step timeout: {limits.step_minutes} minutes: pulumi up interrupted (SIGINT) after {limits.interrupt_minutes} "
        f"minutes (twice the estimate, at least 30), then {limits.grace_minutes} for the longest step in flight "
        f"({format_seconds(longest)}) and the final save ({format_seconds(final_save)})"
    )
    if args.github_output:
        with open(args.github_output, "a", encoding="utf-8") as out:
            out.write(
                f"parallel={parallel}\nskip-checkpoints={'true' if skip else 'false'}\n"
                f"interrupt-minutes={limits.interrupt_minutes}\ngrace-minutes={limits.grace_minutes}\n"
                f"timeout-minutes={limits.step_minutes}\n"
            )
    if args.job_minutes is not None and limits.step_minutes + MARGIN_MINUTES > args.job_minutes:
        print(
            f"error: the estimate needs a {limits.step_minutes}-minute step and {MARGIN_MINUTES} minutes around it, "
            f"past the job's {args.job_minutes}: set pulumiUp.runnerCpus to a larger runner, pulumiUp.parallel, or "
            'split the change (docs/deployment-time.md, "What the workflow runs")',
            file=sys.stderr,
        )
        return EXIT_TOO_LONG
    return EXIT_OK
