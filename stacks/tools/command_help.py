"""One voice for the help of `python -m stacks` commands: what each needs, and its exit statuses.

Every command's `--help` says, after its own description, what it reaches (nothing but the stack
file, vCenter, the cluster, or a registry) and what its exit statuses mean; the top-level `--help`
lists the commands grouped by what they reach (`stacks.cli`). A command declares both with
`command_parser(...)`; `tests/stacks/test_command_help.py` walks every registered command, those
added later too, and holds each to it.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any, Literal

Needs = Literal["offline", "vcenter", "cluster", "registry"]

NEEDS: dict[Needs, tuple[str, str]] = {
    "offline": (
        "Offline: the stack file and this project only",
        "Needs: nothing outside this machine (offline): the stack file and this project; no vCenter, no cluster.",
    ),
    "vcenter": (
        "Needs vCenter (connection settings as `preflight --help` says)",
        "Needs: vCenter, reachable from this machine, and its credentials (settings as `preflight --help` says).",
    ),
    "cluster": (
        "Needs the cluster (kubectl and the stack's kubeconfig)",
        "Needs: the running cluster: `kubectl` on PATH and the stack's kubeconfig (stacks/kubectl.py).",
    ),
    "registry": (
        "Needs a registry or the internet, no vCenter and no cluster",
        "Needs: the internet (`bundle fetch`) or the site's mirror registry (`bundle load`); no vCenter, no cluster.",
    ),
}
"""Per kind: the heading of the top-level list's group, and the line each command's help carries."""

NEEDS_DEFAULT = "needs"
"""The `set_defaults` key a command's parser carries its `Needs` under (read by the top-level help)."""


def command_parser(
    subparsers: Any,
    name: str,
    *,
    summary: str,
    description: str,
    needs: Needs,
    exit_statuses: str | None,
) -> argparse.ArgumentParser:
    """The subcommand `name`: `summary` in the command list, `description` at the top of its
    `--help` (kept as written), then what it needs and `Exit status: ...` below the arguments.
    `exit_statuses=None`: the description has its own `Exit status:` paragraph (checked here)."""
    if exit_statuses is None and "Exit status:" not in description:
        raise ValueError(f"{name}: its description states no `Exit status:`; pass exit_statuses")
    paragraphs = [NEEDS[needs][1], *([f"Exit status: {exit_statuses.strip()}"] if exit_statuses else [])]
    # Raw formatting keeps the descriptions as written; these two paragraphs are wrapped here.
    epilog = "\n\n".join(textwrap.fill(paragraph, width=100) for paragraph in paragraphs)
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=summary,
        description=description.strip(),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(**{NEEDS_DEFAULT: needs})
    return parser
