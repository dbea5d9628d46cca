"""`validate` of one stack file: its own problems, what the policy pack demands of its stack by
name, and its collisions with the stack files beside it, all in one pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stacks import PROJECT_DIR
from stacks.environment.collisions import cross_stack_problems
from stacks.environment.copy_hints import copy_hints, name_hints
from stacks.environment.loader import (
    ENVIRONMENT_KEY,
    ConfigView,
    InvalidEnvironment,
    inspect_environment,
    read_stack_file,
)
from stacks.environment.model import Environment
from stacks.environment.partial import UnparsedValue


def stack_name_problems(stack: str | None, env: Any) -> list[str]:
    """What the policy pack requires of a stack by its name: protection in the stacks it protects
    by default (`protected-in-prod`, policy/gpucluster_policy/protection.py), refused here first."""
    if stack is None:
        return []
    # The pack's own function and defaults, so the two cannot drift; imported only here because
    # it brings pulumi_policy with it.
    from policy.gpucluster_policy.protection import protection_required

    required, why = protection_required({}, stack)
    try:
        protect = bool(env.protect)
    except UnparsedValue:
        return []
    if required and not protect:
        return [
            f"{ENVIRONMENT_KEY}.protect: false, but the policy pack requires protection here ({why}); "
            "set protect: true, or `pulumi up` is refused by protected-in-prod"
        ]
    return []


def check_stack_file(path: Path, stack: str | None = None) -> tuple[ConfigView, Environment]:
    """The file's config and environment; `InvalidEnvironment` with every problem otherwise."""
    view = read_stack_file(path)
    inspection = inspect_environment(view)
    problems = list(inspection.problems)
    hints: list[str] = []
    if inspection.partial is not None:
        problems += stack_name_problems(stack, inspection.partial)
        problems += cross_stack_problems(path, view, inspection.partial)
        hints = name_hints(path, stack, inspection.partial) + copy_hints(path, stack, inspection.partial, problems)
    if problems or inspection.env is None:
        raise InvalidEnvironment(problems, hints)
    return view, inspection.env


def stack_file_path(stack: str, file: str | None) -> Path:
    """The file a command reads for STACK: `--file` when given, else Pulumi.STACK.yaml of the project."""
    return Path(file) if file else PROJECT_DIR / f"Pulumi.{stack}.yaml"
