"""Command line: validate, plan and schema for the stack files in this project.

Every user mistake ends as one line per problem and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from stacks import PROJECT_DIR
from stacks.environment.loader import ENVIRONMENT_KEY, InvalidEnvironment
from stacks.environment.model import Environment
from stacks.environment.stack_file import check_stack_file
from stacks.tools.plan_errors import GraphvizMissing

EXIT_INVALID = 2


def stack_file(stack: str, file: str | None) -> Path:
    return Path(file) if file else PROJECT_DIR / f"Pulumi.{stack}.yaml"


def cmd_validate(args: argparse.Namespace) -> int:
    path = stack_file(args.stack, args.file)
    _, env = check_stack_file(path, args.stack)
    workers, hosts = len(env.gpu_workers.nodes), len(env.hosts)
    print(
        f"{path.name}: valid: environment {env.name!r}, {hosts} GPU hosts, "
        f"{len(env.control_plane.nodes)} control-plane + {workers} GPU worker VMs, "
        f"RDMA {env.rdma_network.subnet} (VLAN {env.rdma_network.vlan_id}), Kubernetes {env.kubernetes.version} ({env.kubernetes.mode})"
    )
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from stacks.tools.plan import plan_stack, summary_tree  # imports the Pulumi SDK: only when planning

    path = stack_file(args.stack, args.file)
    out_dir = Path(args.out)
    graph = Path(args.graph) if args.graph else None
    view, _ = check_stack_file(path, args.stack)  # every problem, cross-stack collisions included, before planning
    result = plan_stack(view, stack=args.stack, out_dir=out_dir, graph_file=graph)
    print(summary_tree(result.run))
    print(
        f"wrote {out_dir / 'resources.json'} and {len(result.manifest_files)} manifest file(s) under {out_dir / 'manifests'}"
    )
    if graph is not None:
        print(f"wrote {graph}")
    return 0


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
    parser = argparse.ArgumentParser(prog="python -m stacks", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    validate = commands.add_parser("validate", help="check a stack file; one line per problem")
    validate.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml")
    validate.add_argument("--file", help="read this file instead (same format)")
    validate.set_defaults(func=cmd_validate)

    plan = commands.add_parser("plan", help="run the program under mocks and write what it would register")
    plan.add_argument("stack")
    plan.add_argument("--file")
    plan.add_argument("--out", required=True, help="folder for resources.json and manifests/")
    plan.add_argument("--graph", help="also write the component graph: FILE.dot, or FILE.svg (needs Graphviz)")
    plan.set_defaults(func=cmd_plan)

    schema = commands.add_parser("schema", help="JSON Schema of the environment, for editors")
    schema.add_argument("--out", help="write to this file instead of stdout")
    schema.set_defaults(func=cmd_schema)

    from stacks.tools.clone import register as register_clone  # here, not at the top: clone imports the loader too

    register_clone(commands)

    from stacks.tools.preflight import register as register_preflight  # pyVmomi loads only when preflight runs

    register_preflight(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except InvalidEnvironment as invalid:
        for line in invalid.problems:
            print(line, file=sys.stderr)
        print(f"{len(invalid.problems)} problem(s) found", file=sys.stderr)
        return EXIT_INVALID
    except (OSError, GraphvizMissing) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INVALID
