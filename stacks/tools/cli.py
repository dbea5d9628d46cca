"""`python -m stacks`: the offline companion of the Pulumi CLI for this project's stack files.

Every user mistake ends as one line per problem and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from stacks import PROJECT_DIR
from stacks.environment.copy_hints import name_hints
from stacks.environment.day_two_check import ACCEPT_FLAG, DayTwoReport, day_two_report
from stacks.environment.loader import ENVIRONMENT_KEY, InvalidEnvironment, load_environment, read_stack_file
from stacks.environment.model import Environment
from stacks.environment.stack_file import check_stack_file
from stacks.tools.deploy_engine import add_engine_arguments, engine_from_args
from stacks.tools.plan_errors import GraphRefused, ManifestFolderRefused, PlanOptionRefused

EXIT_INVALID = 2


def stack_file(stack: str, file: str | None) -> Path:
    return Path(file) if file else PROJECT_DIR / f"Pulumi.{stack}.yaml"


def _version_change_checked(against: str, new_env: Environment) -> Environment:
    """The deployed stack file's environment, once the version change to `new_env` is one kubeadm can
    make (a skipped minor or a downgrade is refused here, before anything is planned)."""
    from stacks.environment.version_change import version_change_problems

    old_env = load_environment(read_stack_file(Path(against)))
    problems = version_change_problems(old_env, new_env)
    if problems:
        raise InvalidEnvironment(problems)
    return old_env


def cmd_validate(args: argparse.Namespace) -> int:
    path = stack_file(args.stack, args.file)
    _, env = check_stack_file(path, args.stack)
    upgrade = ""
    if args.against:
        old_version = _version_change_checked(args.against, env).kubernetes.version
        if old_version != env.kubernetes.version:
            upgrade = f"; upgrade {old_version} -> {env.kubernetes.version} from {args.against}"
    workers, hosts = len(env.gpu_workers.nodes), len(env.hosts)
    print(
        f"{path.name}: valid: environment {env.name!r}, {hosts} GPU hosts, "
        f"{len(env.control_plane.nodes)} control-plane + {workers} GPU worker VMs, "
        f"RDMA {env.rdma_network.subnet} (VLAN {env.rdma_network.vlan_id}), Kubernetes {env.kubernetes.version} ({env.kubernetes.mode})"
        f"{upgrade}"
    )
    for hint in name_hints(path, args.stack, env):  # valid, but the mark of a hand copy
        print(f"hint: {hint}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from stacks.tools import deploy_time, plan_diff
    from stacks.tools.admission import admission_report
    from stacks.tools.change_notes import config_notes
    from stacks.tools.change_time import change_time
    from stacks.tools.plan import (  # imports the Pulumi SDK: only when planning
        plan_stack,
        resource_counts,
        run_plan,
        summary_tree,
    )
    from stacks.tools.upgrade_notes import upgrade_notes

    path = stack_file(args.stack, args.file)
    out_dir = Path(args.out)
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
        old_env = _version_change_checked(args.against, new_env)
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
        durations=durations,
        engine=engine,
    )
    timing = result.timing
    admission = admission_report(new_env, result.run)  # the scheduler's rules over the plan
    changes = rolling = None
    if before is not None:
        old_run, old_env = before
        notes = upgrade_notes(old_env, new_env)
        changes = plan_diff.diff_plans(
            old_run.resources, result.run.resources, [*notes, *config_notes(old_env, new_env)]
        )
        rolling = change_time(changes, result.run.resources, durations)
    written = [str(out_dir / "resources.json"), *map(str, result.manifest_files), *([str(graph)] if graph else [])]
    if args.json:
        document: dict[str, object] = {
            "stack": args.stack,
            "resources": len(result.run.resources),  # the total the text's `total:` line prints
            "resourceCounts": resource_counts(result.run),
            "deployment": timing.as_dict(),
            "admission": admission.as_dict(),
        }
        if changes is not None and rolling is not None:
            document["against"] = {
                "file": args.against,
                "nodes": {c.node: {"verdict": c.verdict, "reasons": c.reasons} for c in changes.nodes},
                "notes": changes.notes,
                "downAtOnce": changes.down_at_once,
                "keys": day_two.as_dict() if day_two is not None else [],
                "rollingChange": {
                    "seconds": rolling.seconds,
                    "chains": rolling.chains,
                    "inWords": rolling.lines()[0],
                },
            }
        print(json.dumps({**document, "wrote": written}, indent=2))
        if day_two is not None and day_two.refused:
            print(f"error: {day_two.refusal_message()}", file=sys.stderr)
            return EXIT_INVALID
        return EXIT_INVALID if admission.failures else 0
    print(summary_tree(result.run))
    print("\n".join(deploy_time.summary_lines(timing)))
    if changes is not None and rolling is not None:
        print(f"against {args.against}:")
        print("\n".join(f"  {line}" for line in rolling.lines()))
        print("\n".join(f"  {line}" for line in changes.lines()))
    if day_two is not None and day_two.changes:
        print("day two (what the running environment does with each changed key):")
        print("\n".join(f"  {line}" for line in day_two.lines()))
    print(
        f"wrote {out_dir / 'resources.json'} and {len(result.manifest_files)} manifest file(s) under {out_dir / 'manifests'}"
    )
    if graph is not None:
        print(f"wrote {graph}")
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


def cmd_schema(args: argparse.Namespace) -> int:
    schema = Environment.model_json_schema(by_alias=True)
    schema["title"] = f"{ENVIRONMENT_KEY} (vsphere-gpu-cluster environment)"
    text = json.dumps(schema, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m stacks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Each command has its own --help, e.g. `python -m stacks plan --help`.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    validate = commands.add_parser("validate", help="check a stack file; one line per problem")
    validate.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml")
    validate.add_argument("--file", help="read this file instead (same format)")
    validate.add_argument(
        "--against",
        metavar="OLD_STACK_FILE",
        help="also check the change from this (deployed) stack file: kubernetes.version one minor at a time, no downgrade",
    )
    validate.set_defaults(func=cmd_validate)

    plan = commands.add_parser("plan", help="run the program under mocks and write what it would register")
    plan.add_argument("stack")
    plan.add_argument("--file")
    plan.add_argument("--out", required=True, help="folder for resources.json and manifests/")
    plan.add_argument(
        "--graph",
        help="also draw the components in deployment order, the critical path in red: FILE.dot, FILE.svg or FILE.png",
    )
    plan.add_argument(
        "--graph-detail",
        action="store_true",
        help="draw each node's plumbing (rollout gates, settles, drains, etcd members) as boxes of their own",
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
    plan.add_argument("--json", action="store_true", help="print a JSON summary (with the deployment estimate) instead")
    plan.add_argument(
        "--durations", help="JSON/YAML file overriding the deployment model's durations (docs/deployment-time.md)"
    )
    add_engine_arguments(plan)
    plan.set_defaults(func=cmd_plan)

    schema = commands.add_parser("schema", help="JSON Schema of the environment, for editors")
    schema.add_argument("--out", help="write to this file instead of stdout")
    schema.set_defaults(func=cmd_schema)

    from stacks.tools.clone import register as register_clone  # here, not at the top: clone imports the loader too

    register_clone(commands)

    from stacks.tools.preflight import register as register_preflight  # pyVmomi loads only when preflight runs

    register_preflight(commands)

    from stacks.tools.verify import register as register_verify  # reads the cluster only when verify runs

    register_verify(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except InvalidEnvironment as invalid:
        for line in invalid.problems:
            print(line, file=sys.stderr)
        print(f"{len(invalid.problems)} problem(s) found", file=sys.stderr)
        # Hints on stdout: stderr stays one line per problem and the count, which scripts read.
        for hint in invalid.hints:
            print(f"hint: {hint}")
        return EXIT_INVALID
    except (OSError, GraphRefused, ManifestFolderRefused, PlanOptionRefused) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INVALID
