"""`python -m stacks`: the companion of the Pulumi CLI for this project's stack files.

Every user mistake ends as one line per problem and exit status 2, never a traceback. Each
command's --help says what it needs and its exit statuses.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from stacks.environment.loader import InvalidEnvironment
from stacks.tools import (
    bundle,
    clone,
    comment,
    deploy_settings,
    images,
    init,
    plan,
    preflight,
    recover,
    retired_copies,
    schema,
    validate,
    verify,
)
from stacks.tools.command_help import NEEDS, NEEDS_DEFAULT
from stacks.tools.plan.errors import GraphRefused, ManifestFolderRefused, PlanOptionRefused

EXIT_INVALID = 2


class _Commands:
    """The subparsers as each command's `register` sees them: it keeps each command's one-line
    summary for the grouped list of the top-level help, instead of argparse's one flat list."""

    def __init__(self, subparsers: Any) -> None:
        self._subparsers = subparsers
        self.summaries: dict[str, str] = {}

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        self.summaries[name] = kwargs.pop("help", None) or ""
        parser: argparse.ArgumentParser = self._subparsers.add_parser(name, **kwargs)
        return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The commands registered on `parser`, by name (argparse keeps them in its subparsers action)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:  # argparse offers no public way to list a parser's subcommands
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def _grouped(parser: argparse.ArgumentParser, summaries: dict[str, str]) -> str:
    """The commands by what they need (stacks/tools/command_help.py), each with its summary."""
    registered = subcommands(parser)
    width = max(map(len, registered)) + 2
    lines = []
    for needs, (heading, _) in NEEDS.items():
        names = [name for name, sub in registered.items() if sub.get_default(NEEDS_DEFAULT) == needs]
        lines += [f"{heading}:", *(f"  {name:<{width}}{summaries.get(name, '')}" for name in names), ""]
    undeclared = [name for name, sub in registered.items() if sub.get_default(NEEDS_DEFAULT) not in NEEDS]
    if undeclared:
        lines += ["Other:", *(f"  {name:<{width}}{summaries.get(name, '')}" for name in undeclared), ""]
    lines += [
        "Each command has its own --help (what it does, needs, exits with), e.g. `python -m stacks plan --help`.",
        "A pull request's plan comment, locally: `python -m stacks comment STACK --against OLD_STACK_FILE`.",
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m stacks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = _Commands(parser.add_subparsers(dest="command", required=True))
    # Each command is a package of stacks/tools; it registers its own arguments and imports its
    # heavy dependencies (the Pulumi SDK, pyVmomi, kubectl) only when it runs.
    tools = (
        init,
        validate,
        plan,
        schema,
        clone,
        images,
        deploy_settings,
        comment,
        preflight,
        retired_copies,
        recover,
        verify,
        bundle,
    )
    for command in tools:
        command.register(commands)
    parser.epilog = _grouped(parser, commands.summaries)
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
