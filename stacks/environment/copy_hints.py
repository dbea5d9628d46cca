"""Hints for a stack file made by hand from another (`cp Pulumi.dev.yaml Pulumi.qa.yaml`, the
usual Pulumi habit): its environment `name` is still the source's, and everything `clone` would
re-derive collides with the source. Both point to `python -m stacks clone`, which does it right.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stacks.environment.collisions import load_others
from stacks.environment.loader import ENVIRONMENT_KEY
from stacks.environment.partial import UnparsedValue
from stacks.environment.stack_names import stack_files

CLONE_OPTIONS = "--vlan N --rdma-subnet CIDR --mgmt-subnet CIDR"


def clone_command(source: str, target: str) -> str:
    return f"python -m stacks clone {source} {target} {CLONE_OPTIONS}"


def _is_the_stacks_own_file(path: Path, stack: str | None) -> bool:
    """`Pulumi.<stack>.yaml`: the file Pulumi reads for the stack. A `--file draft.yaml` is not held
    to the stack's name (drafts, the corpus of broken files)."""
    return stack is not None and path.name == f"Pulumi.{stack}.yaml"


def name_hints(path: Path, stack: str | None, env: Any) -> list[str]:
    """The environment's `name` should be its stack's. The program names nothing after it (the
    names it creates come from `vm.namePrefix`, the switch and folder keys), so a mismatch is a
    hint, not a problem: but it is the mark of a file copied by hand."""
    if not _is_the_stacks_own_file(path, stack):
        return []
    try:
        name = env.name
    except UnparsedValue:
        return []
    if not isinstance(name, str) or name == stack:
        return []
    source = name if (path.parent / f"Pulumi.{name}.yaml").is_file() else "SRC"
    return [
        f"{ENVIRONMENT_KEY}.name is {name!r}, but this file is stack {stack!r} ({path.name}): set name: {stack}, "
        f"or create the stack with `{clone_command(source, str(stack))}`"
    ]


def copy_hints(path: Path, stack: str | None, env: Any, problems: list[str]) -> list[str]:
    """One hint when the file looks like a hand copy of another stack file: it shares that file's
    environment name or VM name prefix, and collides with it."""
    if not _is_the_stacks_own_file(path, stack):
        return []
    here = path.resolve()
    files = {name: p for name, p in stack_files(path.parent).items() if p.resolve() != here}
    others, _ = load_others(files, exclude=())
    best: tuple[int, str, str] | None = None
    for other in others:
        try:
            copied = other.env.name == env.name or other.env.vm.name_prefix == env.vm.name_prefix
        except UnparsedValue:
            continue
        count = sum(f": collides with {other.file}: " in line for line in problems)
        if copied and count and (best is None or count > best[0]):
            best = (count, other.file, other.env.name)
    if best is None:
        return []
    count, file, source_stack = best
    source = file[len("Pulumi.") : -len(".yaml")] if file.startswith("Pulumi.") else source_stack
    hosts = any(
        f".host: collides with {file}" in line or f"rdmaVmnics: collides with {file}" in line for line in problems
    )
    return [
        f"{path.name} looks like a copy of {file} ({count} of the problems above collide with it): "
        f"`{clone_command(source, str(stack))} --force` writes it with every name, VLAN and address re-derived"
        + (" (add --host-map OLD=NEW for its ESXi hosts)" if hosts else "")
    ]
