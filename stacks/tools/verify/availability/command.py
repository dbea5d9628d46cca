"""The `--availability` flags of `python -m stacks verify` and their guards.

The check restarts the device plugin and the kubelet on a live node, so it runs only when asked
twice: `--availability` and `--confirm STACK` with the exact stack name; and never on a stack with
`protect: true` (prod) unless `--disrupt-protected` says so too. Every refusal happens before the
cluster is touched.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stacks.environment.model import Environment
from stacks.kubectl import Kubectl, VerifyError, kubeconfig_for
from stacks.tools.verify.availability.probe import run_availability, ssh_user_problem

EXIT_FAILED = 1
EXIT_USAGE = 2
DEFAULT_TIMEOUT_MINUTES = 10.0
_ONLY_WITH_AVAILABILITY = ("confirm", "disrupt_protected", "ssh_user", "node", "timeout_minutes")


def add_flags(parser: Any) -> None:
    group = parser.add_argument_group(
        "availability check",
        "run a GPU probe pod, restart the device plugin and then the kubelet on its node, and check that the "
        "pod kept running and the node recovered (docs/availability.md)",
    )
    group.add_argument("--availability", action="store_true", help="run the availability check instead of reading jobs")
    group.add_argument("--confirm", metavar="STACK", help="the stack's name again: the check disrupts one of its nodes")
    group.add_argument("--disrupt-protected", action="store_true", help="allow the check on a stack with protect: true")
    group.add_argument(
        "--ssh-user", help="user that may `sudo systemctl restart kubelet` on the node (the template's default user)"
    )
    group.add_argument("--node", help="GPU worker to disrupt (default: wherever the scheduler puts the probe)")
    group.add_argument(
        "--timeout-minutes",
        type=float,
        help=f"how long each step may take to recover (default {DEFAULT_TIMEOUT_MINUTES:g})",
    )


def refusal(args: argparse.Namespace, env: Environment) -> str | None:
    """Why the given flags must not run (None: they may)."""
    if not args.availability:
        given = [f"--{name.replace('_', '-')}" for name in _ONLY_WITH_AVAILABILITY if getattr(args, name)]
        return f"{', '.join(given)}: only with --availability" if given else None
    if args.confirm != args.stack:
        return (
            f"--availability restarts the device plugin and the kubelet on a GPU worker of stack {args.stack!r}: "
            f"confirm with --confirm {args.stack}"
        )
    if env.protect and not args.disrupt_protected:
        return (
            f"stack {args.stack!r} has protect: true (environment.protect): --availability disrupts one of its "
            "GPU workers; add --disrupt-protected if that is what you mean"
        )
    if not args.ssh_user:
        return "--availability needs --ssh-user USER: a user on the nodes who may run `sudo systemctl restart kubelet`"
    if (problem := ssh_user_problem(args.ssh_user)) is not None:
        return problem
    workers = [n.name for n in env.gpu_workers.nodes]
    if args.node is not None and args.node not in workers:
        return f"--node {args.node}: not a GPU worker of stack {args.stack!r}; one of {', '.join(workers)}"
    if args.timeout_minutes is not None and args.timeout_minutes <= 0:
        return f"--timeout-minutes {args.timeout_minutes:g}: give a positive number of minutes"
    return None


def cmd_availability(args: argparse.Namespace, env: Environment) -> int:
    minutes = args.timeout_minutes if args.timeout_minutes is not None else DEFAULT_TIMEOUT_MINUTES
    try:
        with kubeconfig_for(args.stack, args.kubeconfig) as kubeconfig:
            verdict = run_availability(
                Kubectl(kubeconfig, env.jobs.namespace),
                env,
                node=args.node,
                ssh_user=args.ssh_user,
                timeout_s=minutes * 60,
            )
    except VerifyError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(verdict.render())
    print("verdict: PASS" if verdict.passed else f"verdict: FAIL ({verdict.job})")
    return 0 if verdict.passed else EXIT_FAILED
