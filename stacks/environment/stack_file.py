"""`validate` of one stack file: its own problems and its collisions with the stack files beside it,
all in one pass."""

from __future__ import annotations

from pathlib import Path

from stacks.environment.collisions import cross_stack_problems
from stacks.environment.loader import ConfigView, InvalidEnvironment, inspect_environment, read_stack_file
from stacks.environment.model import Environment


def check_stack_file(path: Path) -> tuple[ConfigView, Environment]:
    """The file's config and environment; `InvalidEnvironment` with every problem otherwise."""
    view = read_stack_file(path)
    inspection = inspect_environment(view)
    problems = list(inspection.problems)
    if inspection.partial is not None:
        problems += cross_stack_problems(path, view, inspection.partial)
    if problems or inspection.env is None:
        raise InvalidEnvironment(problems)
    return view, inspection.env
