"""`python -m stacks plan STACK`: what `pulumi up` would build, its deployment time, whether each
workload would run, and with `--against` what a change does to the running environment."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from stacks import PROJECT_DIR
from stacks.environment.day_two.check import ACCEPT_FLAG, DayTwoReport, day_two_report
from stacks.environment.loader import read_stack_file
from stacks.environment.stack_file import check_stack_file, stack_file_path
from stacks.environment.version_change import checked_old_environment
from stacks.tools.command_help import command_parser
from stacks.tools.plan.deploy_time.engine_options import add_engine_arguments, engine_from_args
from stacks.tools.plan.errors import PlanOptionRefused

EXIT_INVALID = 2


def default_out(stack: str) -> Path:
    """Where `plan STACK` writes without --out: build/ is ignored by git (.gitignore), so the plan
    of every stack can sit there without a folder to think of first."""
    return PROJECT_DIR / "build" / "plan" / stack


def cmd_plan(args: argparse.Namespace) -> int:
    from stacks.environment.version_policy import policy_lines, version_warnings
    from stacks.tools.plan import diff as plan_diff
    from stacks.tools.plan.admission.check import admission_report
    from stacks.tools.plan.change_notes import config_notes
    from stacks.tools.plan.command import (  # imports the Pulumi SDK: only when planning
        plan_stack,
        resource_counts,
        run_plan,
        summary_tree,
    )
    from stacks.tools.plan.deploy_time import durations as deploy_time
    from stacks.tools.plan.deploy_time.change import change_time
    from stacks.tools.plan.deploy_time.estimate import summary_lines
    from stacks.tools.plan.deploy_time.workflow import workflow_lines
    from stacks.tools.plan.scrape_note import scrape_lines
    from stacks.tools.plan.template_note import gpu_template_lines, gpu_template_note
    from stacks.tools.plan.upgrade_notes import upgrade_notes
    from stacks.tools.plan.workload_diff import workload_changes

    path = stack_file_path(args.stack, args.file)
    out_dir = Path(args.out) if args.out else default_out(args.stack)
    graph = Path(args.graph) if args.graph else None
    try:
        durations = deploy_time.load_durations(Path(args.durations) if args.durations else None)
    except (ValueError, yaml.YAMLError) as error:
        raise PlanOptionRefused(f"--durations: {error}") from None
    try:
        engine = engine_from_args(args)
    except ValueError as error:
        raise PlanOptionRefused(str(error)) from None
    if args.accept_rebuild and not args.against:
        raise PlanOptionRefused(f"{ACCEPT_FLAG}: only with --against OLD_STACK_FILE, whose change it accepts")
    # Every problem, cross-stack collisions included, before planning.
    view, new_env = check_stack_file(path, args.stack)
    before = None
    day_two: DayTwoReport | None = None
    if args.against:
        # The old file is validated first: its problems would otherwise surface as a confusing diff.
        old_view = read_stack_file(Path(args.against))
        old_env = checked_old_environment(args.against, new_env)
        # Per key, what the live environment does with the change (issue 28); a mistyped
        # --accept-rebuild is refused before anything runs.
        day_two = day_two_report(old_env, new_env, args.accept_rebuild or ())
        if day_two.unused_accepts:
            raise PlanOptionRefused(day_two.unused_accept_message())
        before = (run_plan(old_view, stack=args.stack), old_env)
    result = plan_stack(
        view,
        stack=args.stack,
        out_dir=out_dir,
        graph_file=graph,
        graph_detail=args.graph_detail,
        graph_order=args.graph_order,
        durations=durations,
        engine=engine,
    )
    timing = result.timing
    workflow_text, workflow_data = workflow_lines(result.run.resources, new_env.pulumi_up)
    admission = admission_report(new_env, result.run)  # the scheduler's rules over the plan
    changes = rolling = None
    workloads: list[str] = []
    if before is not None:
        old_run, old_env = before
        notes = upgrade_notes(old_env, new_env)
        changes = plan_diff.diff_plans(
            old_run.resources, result.run.resources, [*notes, *config_notes(old_env, new_env)]
        )
        rolling = change_time(changes, result.run.resources, durations)
        workloads = workload_changes(old_run.resources, result.run.resources)
    written = [str(out_dir / "resources.json"), *map(str, result.manifest_files), *([str(graph)] if graph else [])]
    if args.format != "text":
        document: dict[str, Any] = {
            "stack": args.stack,
            "resources": len(result.run.resources),  # the total the text's `total:` line prints
            "resourceCounts": resource_counts(result.run),
            "deployment": {**timing.as_dict(), "workflow": workflow_data},
            "admission": admission.as_dict(),
            "scraping": scrape_lines(new_env),
            "gpuTemplate": gpu_template_note(new_env),
            "versionPolicy": {"summary": policy_lines(new_env), "warnings": version_warnings(new_env)},
        }
        if changes is not None and rolling is not None:
            document["against"] = {
                "file": args.against,
                "nodes": {c.node: {"verdict": c.verdict, "reasons": c.reasons} for c in changes.nodes},
                "notes": changes.notes,
                "downAtOnce": changes.down_at_once,
                "workloads": workloads,
                "keys": day_two.as_dict() if day_two is not None else [],
                "rollingChange": {
                    "seconds": rolling.seconds,
                    "chains": rolling.chains,
                    "inWords": rolling.lines()[0],
                },
            }
        if args.format == "markdown":
            from stacks.tools.plan.markdown import render_markdown

            print(render_markdown(document), end="")
        else:
            print(json.dumps({**document, "wrote": written}, indent=2))
        if day_two is not None and day_two.refused:
            print(f"error: {day_two.refusal_message()}", file=sys.stderr)
            return EXIT_INVALID
        return EXIT_INVALID if admission.failures else 0
    print(summary_tree(result.run))
    print("\n".join(summary_lines(timing)))
    print("\n".join(workflow_text))
    if changes is not None and rolling is not None:
        print(f"against {args.against}:")
        print("\n".join(f"  {line}" for line in rolling.lines()))
        print("\n".join(f"  {line}" for line in changes.lines()))
        print("\n".join(f"  Kubernetes object {line}" for line in workloads))
    if day_two is not None and day_two.changes:
        print("day two (what the running environment does with each changed key):")
        print("\n".join(f"  {line}" for line in day_two.lines()))
    print(
        f"wrote {out_dir / 'resources.json'} and {len(result.manifest_files)} manifest file(s) under {out_dir / 'manifests'}"
    )
    if graph is not None:
        print(f"wrote {graph}")
    for line in [*gpu_template_lines(new_env), *scrape_lines(new_env)]:
        print(line)
    print("version policy:")
    for line in [*policy_lines(new_env), *(f"warning: {w}" for w in version_warnings(new_env))]:
        print(f"  {line}")
    print("admission (would each workload run where it is meant to?):")
    for line in admission.lines():
        print(f"  {line}")
    if admission.failures:
        names = ", ".join(v.workload for v in admission.failures)
        print(f"error: {len(admission.failures)} workload(s) cannot run: {names}", file=sys.stderr)
    if day_two is not None and day_two.refused:
        print(f"error: {day_two.refusal_message()}", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_INVALID if admission.failures else 0


def register(commands: Any) -> None:
    plan = command_parser(
        commands,
        "plan",
        summary="run the program under mocks and write what it would register",
        description=(__doc__ or "")
        + "\n\nIt runs the real program under the Pulumi SDK's mock runtime: no vCenter, no cluster, no Pulumi "
        "backend; never a replacement for `pulumi preview`, which diffs against real state (docs/offline-tools.md).",
        needs="offline",
        exit_statuses="0 when planned and every workload would run; 2 when the stack file (or --against's) is "
        "invalid, a workload cannot run where it is meant to, --against's change is refused (a live cluster "
        "cannot take it without --accept-rebuild KEY), or an option is wrong (--graph, --durations, the engine's).",
    )
    plan.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml (and names the default --out)")
    plan.add_argument("--file", help="read this stack file instead of Pulumi.STACK.yaml (same format)")
    plan.add_argument(
        "--out",
        help="folder for resources.json and manifests/ (default: build/plan/STACK in the project folder)",
    )
    plan.add_argument(
        "--graph",
        help="also draw what pulumi up builds where (hosts, VMs, vGPU profiles, switch, addresses, the cluster on "
        "top) with the critical path and its minutes: FILE.dot, FILE.svg or FILE.png",
    )
    plan.add_argument(
        "--graph-order",
        action="store_true",
        help="draw our components in deployment order instead, the critical path in red",
    )
    plan.add_argument(
        "--graph-detail",
        action="store_true",
        help="the deployment order with each node's plumbing (rollout gates, settles, drains, etcd members) as boxes",
    )
    plan.add_argument(
        "--against", metavar="OLD_STACK_FILE", help="also say, per node, what changing from this stack file does"
    )
    plan.add_argument(
        ACCEPT_FLAG,
        dest="accept_rebuild",
        action="append",
        metavar="KEY",
        help="with --against: go ahead with a change a live cluster cannot take safely (plan names the KEY, e.g. "
        "kubernetes.podCidr), having done or planned its procedure (docs/environments.md, day two); repeatable",
    )
    plan.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="json: a summary with the deployment estimate; markdown: what the change does to the running "
        "cluster, for a pull request comment (the preview workflow posts it)",
    )
    plan.add_argument("--json", dest="format", action="store_const", const="json", help="the same as --format json")
    plan.add_argument(
        "--durations", help="JSON/YAML file overriding the deployment model's durations (docs/deployment-time.md)"
    )
    add_engine_arguments(plan)
    plan.set_defaults(func=cmd_plan)
