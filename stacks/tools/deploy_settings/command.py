"""`python -m stacks deploy-settings STACK --preview preview.json`: the engine settings of this run
of `pulumi up` in the deploy workflow, and the estimate for exactly them.

Reads the stack's `pulumiUp` keys and plans the program under mocks (as `plan` does) for the plan's
width and the estimate; reads the run's own `pulumi preview --json` to decide the checkpoints
(stacks/tools/plan/deploy_time/workflow.py says when they are skipped, and why). Prints one line
per decision and the estimate beside the CLI's defaults; with `--github-output FILE` appends
`parallel=`, `skip-checkpoints=` and `timeout-minutes=` for the workflow's next steps.

Exit status: 0; 1 when the estimate does not fit `--job-minutes` (the job would be killed midway:
the line names a runner size or setting that fits); 2 on an invalid stack file or preview document.
"""

from __future__ import annotations

import argparse
import json
import math
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


def timeout_minutes(estimate_s: float) -> int:
    """The `pulumi up` step's timeout: twice the estimate, at least 30 minutes."""
    return max(30, math.ceil(2 * estimate_s / 60))


def cmd_deploy_settings(args: argparse.Namespace) -> int:
    from stacks.environment.loader import load_environment
    from stacks.tools.plan.command import run_plan
    from stacks.tools.plan.deploy_time.estimate import estimate
    from stacks.tools.plan.deploy_time.words import format_seconds
    from stacks.tools.plan.deploy_time.workflow import (
        cli_default_engine,
        create_only,
        deploy_parallel,
        plan_width,
        preview_ops,
        workflow_engine,
    )

    view, _ = check_stack_file(stack_file_path(args.stack, args.file), args.stack)
    deploy = load_environment(view).pulumi_up
    if args.preview:
        try:
            document = json.loads(Path(args.preview).read_text())
            ops = preview_ops(document)
        except (OSError, ValueError, TypeError, AttributeError) as error:
            print(f"error: --preview {args.preview}: not a `pulumi preview --json` document ({error})", file=sys.stderr)
            return EXIT_INVALID
    else:
        ops = {"create": 1}
    skip, why = create_only(ops)
    run = run_plan(view, stack=args.stack)
    vcenter = estimate(run.resources, None, None)
    width = plan_width(vcenter.bound, vcenter.pulumi_up)
    parallel = deploy_parallel(deploy, width)
    chosen = estimate(run.resources, None, workflow_engine(deploy, width, create_only=skip))
    defaults = estimate(run.resources, None, cli_default_engine(deploy))
    source = "pulumiUp.parallel" if deploy.parallel is not None else f"the plan's width {width}"
    minutes = timeout_minutes(chosen.pulumi_up.seconds)
    print(f"--parallel {parallel} ({source}; {deploy.runner_cpus} runner CPUs)")
    print(f"checkpoints: {why}")
    print(
        f"estimate: pulumi up {format_seconds(chosen.pulumi_up.seconds)} with these settings "
        f"({chosen.engine.describe() if chosen.engine else ''})"
    )
    print(
        f"  the CLI's defaults instead: {format_seconds(defaults.pulumi_up.seconds)} "
        f"({defaults.engine.describe() if defaults.engine else ''})"
    )
    print(f"step timeout: {minutes} minutes")
    if args.github_output:
        with open(args.github_output, "a", encoding="utf-8") as out:
            out.write(
                f"parallel={parallel}\nskip-checkpoints={'true' if skip else 'false'}\ntimeout-minutes={minutes}\n"
            )
    if args.job_minutes is not None and minutes + MARGIN_MINUTES > args.job_minutes:
        print(
            f"error: the estimate needs a {minutes}-minute step and {MARGIN_MINUTES} minutes around it, past the "
            f"job's {args.job_minutes}: set pulumiUp.runnerCpus to a larger runner, pulumiUp.parallel, or split the "
            'change (docs/deployment-time.md, "What the workflow runs")',
            file=sys.stderr,
        )
        return EXIT_TOO_LONG
    return EXIT_OK
