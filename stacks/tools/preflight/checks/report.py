"""Findings and the report that collects them; small facts several checks share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from stacks.environment.loader import ENVIRONMENT_KEY
from stacks.environment.model import Environment, NodeSpec
from stacks.environment.rules import format_path

Level = Literal["OK", "WARN", "BLOCKER"]
KeyPath = tuple[str | int, ...]
OurVms = dict[str, tuple[str, int, NodeSpec]]
"""VM name -> (pool key, index, node) for every node the stack builds."""

EXISTS_NOTE = "exists already (fine if this stack created it)"


@dataclass(frozen=True)
class Finding:
    level: Level
    key: str
    """Where in the stack file (or `vsphere:*` config) the finding points."""
    message: str

    def render(self) -> str:
        return f"{self.level:<7} {self.key}: {self.message}"


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)

    def add(self, level: Level, path: KeyPath, message: str) -> None:
        self.findings.append(Finding(level, format_path(ENVIRONMENT_KEY, path), message))

    def ok(self, path: KeyPath, message: str) -> None:
        self.add("OK", path, message)

    def warn(self, path: KeyPath, message: str) -> None:
        self.add("WARN", path, message)

    def blocker(self, path: KeyPath, message: str) -> None:
        self.add("BLOCKER", path, message)


def version_tuple(text: str) -> tuple[int, ...]:
    """`7.0.3` -> (7, 0, 3); non-digits in a part are dropped, an empty part counts 0."""
    parts = []
    for part in text.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def our_vm_names(env: Environment) -> OurVms:
    """VM name -> (pool key, index, node) for every node the stack builds."""
    names = {}
    for pool_key, pool in (("controlPlane", env.control_plane), ("gpuWorkers", env.gpu_workers)):
        for index, node in enumerate(pool.nodes):
            names[env.vm_name(node)] = (pool_key, index, node)
    return names


def worker_reservation_mb(env: Environment) -> int:
    workers = env.gpu_workers
    return workers.memory_reservation_mb if workers.memory_reservation_mb is not None else workers.memory_mb


def listing(names: Iterable[object], *, empty: str = "none") -> str:
    """`a, b, c` sorted, or `empty`: what exists, for a finding that says something is missing."""
    items = sorted(str(n) for n in names)
    return ", ".join(items) if items else empty
