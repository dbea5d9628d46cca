"""The rule registry: what a problem is, how its key path prints, and the list `validate` runs.

Rules live in several modules by subject (`rules`, `rules_kubernetes`, `rules_vsphere`,
`rules_software`); each registers itself here with `@rule`. A rule is a function from an
`Environment` to the problems it finds, every problem naming the exact key path (camelCase, as
written in the stack file) and the fix.

Rules also run on an environment that only partly parsed (`stacks.environment.partial`): the
values that failed their field checks are `Unparsed` placeholders, and a rule that touches one
is skipped as a whole, so it never reports a problem that is only a consequence of another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stacks.environment.partial import UnparsedValue, has_unparsed

if TYPE_CHECKING:
    from stacks.environment.model import Environment

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    path: Path
    message: str

    def render(self, root: str) -> str:
        return f"{format_path(root, self.path)}: {self.message}"


def format_path(root: str, path: Iterable[str | int]) -> str:
    text = root
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


Rule = Callable[["Environment"], Iterator[Problem]]
RULES: list[Rule] = []


BACKSTOPS: list[Rule] = []
"""Rules that call a component's own check (rules_components); they run only when every rule
passed, so a user sees each mistake once, with the rule's clearer message, and a check that lives
only in a component still stops `validate`."""


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def backstop(fn: Rule) -> Rule:
    BACKSTOPS.append(fn)
    return fn


def run_rule(fn: Rule, env: Environment) -> list[Problem]:
    """The rule's problems; none when it needs a value that did not parse (reported already)."""
    try:
        return list(fn(env))
    except UnparsedValue:
        return []


def check(env: Environment) -> list[Problem]:
    problems = [problem for each in RULES for problem in run_rule(each, env)]
    if problems or has_unparsed(env):
        # A backstop is the net under the rules: a component's message about a mistake a rule has
        # already named (or its consequences) would only repeat it less clearly.
        return problems
    for each in BACKSTOPS:
        problems += run_rule(each, env)
    return problems
