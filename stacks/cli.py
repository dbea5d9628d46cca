"""`python -m stacks`: the offline companion of the Pulumi CLI for this project's stack files.

Every user mistake ends as one line per problem and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from stacks.environment.loader import InvalidEnvironment
from stacks.tools import (
    bundle,
    clone,
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
from stacks.tools.plan.errors import GraphRefused, ManifestFolderRefused, PlanOptionRefused

EXIT_INVALID = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m stacks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Each command has its own --help, e.g. `python -m stacks plan --help`.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    # Each command is a package of stacks/tools; it registers its own arguments and imports its
    # heavy dependencies (the Pulumi SDK, pyVmomi, kubectl) only when it runs.
    tools = (init, validate, plan, schema, clone, preflight, retired_copies, recover, images, bundle, verify, deploy_settings)
    for command in tools:
        command.register(commands)
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
