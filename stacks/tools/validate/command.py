"""`python -m stacks validate STACK`: check a stack file, one line per problem, or a summary."""

from __future__ import annotations

import argparse
from typing import Any

from stacks.environment.copy_hints import name_hints
from stacks.environment.credential_history import credential_history_warnings, imported_environment_warnings
from stacks.environment.rules.mirror import trust_warnings, unrewritten_images
from stacks.environment.stack_file import check_stack_file, stack_file_path
from stacks.environment.version_change import checked_old_environment
from stacks.environment.version_policy import version_warnings
from stacks.tools.command_help import command_parser


def cmd_validate(args: argparse.Namespace) -> int:
    path = stack_file_path(args.stack, args.file)
    _, env = check_stack_file(path, args.stack)
    upgrade = ""
    if args.against:
        old_version = checked_old_environment(args.against, env).kubernetes.version
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
    for image in unrewritten_images(env):  # what mirror.registry could not move
        print(f"mirror: not rewritten: {image}")
    for warning in version_warnings(env):  # valid, but past its end of life or untested with Calico
        print(f"warning: {warning}")
    for warning in trust_warnings(env):  # valid, but a site registry's certificate seldom has a public CA
        print(f"warning: {warning}")
    # Valid, but a preview could read a deploy account: from the file's history, or an ESC import.
    for warning in credential_history_warnings(path) + imported_environment_warnings(path):
        print(f"warning: {warning}")
    return 0


def register(commands: Any) -> None:
    validate = command_parser(
        commands,
        "validate",
        summary="check a stack file; one line per problem",
        description=__doc__ or "",
        needs="offline",
        exit_statuses="0 when the stack file is valid (hints and warnings may follow the summary line); 2 when it "
        "is not (one line per problem on stderr, then their count) or the arguments are wrong.",
    )
    validate.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml")
    validate.add_argument("--file", help="read this file instead (same format)")
    validate.add_argument(
        "--against",
        metavar="OLD_STACK_FILE",
        help="also check the change from this (deployed) stack file: kubernetes.version one minor at a time, no downgrade",
    )
    validate.set_defaults(func=cmd_validate)
