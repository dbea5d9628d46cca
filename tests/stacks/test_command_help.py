"""Every command of `python -m stacks` explains itself the same way: what it does, what it needs
(nothing, vCenter, the cluster, a registry) and its exit statuses; the top-level help groups the
commands by what they need. The commands are found in the parser, so a command added later is
held to the same (issue 55, item 4)."""

from __future__ import annotations

import argparse
import re

import pytest

from stacks.cli import build_parser


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command under `parser`, nested ones too (`bundle fetch`), by its words."""
    found = []
    for action in parser._actions:  # argparse has no public listing of subcommands
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((" ".join((*path, name)), sub))
                found += _walk(sub, (*path, name))
    return found


COMMANDS = _walk(build_parser())
TOP_LEVEL = [name for name, _ in COMMANDS if " " not in name]
NEEDS_LINE = re.compile(r"^Needs: \S", re.MULTILINE)


def test_the_walk_finds_the_commands() -> None:
    # The walk itself must see commands, or every test below would pass on nothing.
    assert {"validate", "plan", "schema", "verify", "preflight", "bundle fetch"} <= {name for name, _ in COMMANDS}


@pytest.mark.parametrize(("name", "parser"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_every_command_help_says_what_it_does_needs_and_exits_with(name: str, parser: argparse.ArgumentParser) -> None:
    text = parser.format_help()
    problems = []
    if not (parser.description or "").strip():
        problems.append("no description")
    if "Exit status:" not in text:
        problems.append("no 'Exit status:' section")
    if not NEEDS_LINE.search(text):
        problems.append("no 'Needs:' line (offline, vCenter, the cluster or a registry)")
    undocumented = [
        action.dest
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and action.help is None
    ]
    if undocumented:
        problems.append(f"arguments without help: {undocumented}")
    assert problems == [], f"`python -m stacks {name} --help`: {'; '.join(problems)}"


def test_top_level_help_groups_the_commands_by_what_they_need() -> None:
    text = build_parser().format_help()
    groups = {
        heading: body
        for heading, body in re.findall(r"^(Offline|Needs vCenter|Needs the cluster|Needs a registry)[^\n]*:\n((?:  \S.*\n)+)", text, re.MULTILINE)
    }
    assert set(groups) == {"Offline", "Needs vCenter", "Needs the cluster", "Needs a registry"}, text
    listed = {line.split()[0]: heading for heading, body in groups.items() for line in body.splitlines()}
    assert sorted(listed) == sorted(TOP_LEVEL), "every command in exactly one group"
    assert listed["validate"] == "Offline"
    assert listed["preflight"] == "Needs vCenter"
    assert listed["verify"] == "Needs the cluster"
    assert "python -m stacks comment STACK" in text


def test_plan_writes_under_build_plan_stack_without_out() -> None:
    from stacks import PROJECT_DIR
    from stacks.tools.plan.cli import default_out

    args = build_parser().parse_args(["plan", "lab"])
    assert args.out is None
    assert default_out("lab") == PROJECT_DIR / "build" / "plan" / "lab"
