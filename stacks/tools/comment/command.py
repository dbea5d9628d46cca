"""`python -m stacks comment STACK --against OLD_STACK_FILE`: the plan section the pull request's
comment carries for STACK, rendered here as the workflow renders it.

The comment workflow (.github/workflows/plan-comment.yml) runs `python3 scripts/plan_comment.py
render` with the standard library only (it runs no code of the pull request and needs no
virtualenv); this command runs the same function of that script (`render`), so the text is the
same: `plan STACK --file HEAD --against OLD --format markdown`, with the rebuilds the description
accepts (`accept-rebuild: STACK KEY` lines, as in the pull request's description), and a verdict.
Writes FOLDER/section.md and the plan's files under FOLDER/plan, and prints the section.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from stacks import PROJECT_DIR
from stacks.environment.stack_file import stack_file_path
from stacks.tools.command_help import command_parser

SCRIPT = PROJECT_DIR / "scripts" / "plan_comment.py"


def plan_comment_script() -> ModuleType:
    """scripts/plan_comment.py as a module: it is a script (no package), so it is loaded by path."""
    spec = importlib.util.spec_from_file_location("plan_comment", SCRIPT)
    if spec is None or spec.loader is None:
        raise OSError(f"{SCRIPT}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cmd_comment(args: argparse.Namespace) -> int:
    script = plan_comment_script()
    stack = args.stack
    if not script.STACK_NAME.match(stack):
        raise OSError(f"{stack!r} is not a stack name (lower-case letters, digits, '-'), as Pulumi.STACK.yaml needs")
    head = stack_file_path(stack, args.file).resolve()
    if not head.is_file():
        # The workflow renders a deleted stack file as such; here a missing one is a typo far more often.
        raise OSError(f"{head}: no such stack file")
    base = Path(args.against).resolve() if args.against else None
    if base is not None and not base.is_file():
        raise OSError(f"--against {base}: no such file")
    description = Path(args.description).read_text() if args.description else ""
    out = Path(args.out).resolve() if args.out else PROJECT_DIR / "build" / "comment" / stack
    out.mkdir(parents=True, exist_ok=True)
    # render runs `python -m stacks plan` in this process's folder, as the workflow does from the
    # checkout's root: the project folder, whichever folder the command was started in.
    os.chdir(PROJECT_DIR)
    text, status = script.render(stack, base, head, description, sys.executable, out / "plan")
    (out / "section.md").write_text(text)
    print(text, end="")
    return int(status)


def register(commands: Any) -> None:
    comment = command_parser(
        commands,
        "comment",
        summary="the pull request's plan comment for a stack, rendered locally (what plan-comment.yml posts)",
        description=__doc__ or "",
        needs="offline",
        exit_statuses="0 when the change may go ahead; 1 when it may not as it is (refused, a workload will not "
        "run, or a stack file is invalid: the section says which); 2 when a file named is missing.",
    )
    comment.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml (the pull request's version)")
    comment.add_argument("--file", help="the pull request's stack file instead of Pulumi.STACK.yaml")
    comment.add_argument(
        "--against",
        metavar="OLD_STACK_FILE",
        help="the stack file at the pull request's base, e.g. from `git show main:Pulumi.STACK.yaml > "
        "/tmp/old.yaml`; without it: the pull request adds the stack",
    )
    comment.add_argument(
        "--description", metavar="FILE", help="the pull request's description, for its `accept-rebuild:` lines"
    )
    comment.add_argument("--out", help="folder for section.md and plan/ (default: build/comment/STACK)")
    comment.set_defaults(func=cmd_comment)
