"""Findings and the report that collects them; small facts several checks share."""

from __future__ import annotations

import re
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


_INDEX = re.compile(r"\[(\d+)\]")
_HOST = "\0"
"""Where a host's quoted name stood in a message, while findings are compared."""


def _merged_key(keys: list[str]) -> str:
    """`a[0].b[1]` and `a[0].b[0]` -> `a[0].b[0,1]`: each list index, every value the keys have."""
    columns = [sorted({int(_INDEX.findall(key)[i]) for key in keys}) for i in range(len(_INDEX.findall(keys[0])))]
    parts = iter(",".join(str(index) for index in column) for column in columns)
    return _INDEX.sub(lambda _: f"[{next(parts)}]", keys[0])


def grouped(findings: list[Finding], hosts: Iterable[str]) -> list[Finding]:
    """WARN and BLOCKER findings that differ only in the host they name and the list indexes of
    their key, as one line naming every host and index (`gpuWorkers.vgpuProfiles[0,1]: each of
    hosts 'a', 'b' does not offer ...`), where the first of them stood; OK lines and the rest as
    they are. A profile no host offers was one line per host per slot (issue 54: 12 lines on 6 hosts)."""
    names = sorted(set(hosts), key=len, reverse=True)  # the longest first: no name inside another
    groups: dict[tuple[str, ...], list[tuple[Finding, str | None]]] = {}
    for number, finding in enumerate(findings):
        message, named = finding.message, None
        for name in names:
            if f"'{name}'" in message:
                message, named = message.replace(f"'{name}'", _HOST), name
                break
        shape = (finding.level, _INDEX.sub("[*]", finding.key), message) if finding.level != "OK" else (str(number),)
        groups.setdefault(shape, []).append((finding, named))
    merged = []
    for members in groups.values():
        first = members[0][0]
        if len(members) == 1:
            merged.append(first)
            continue
        listed = ", ".join(f"'{name}'" for name in dict.fromkeys(n for _, n in members if n is not None))
        text = first.message
        if listed:
            named = members[0][1]
            text = first.message.replace(f"host '{named}'", f"each of hosts {listed}", 1)
            if text == first.message:
                text = first.message.replace(f"'{named}'", f"each of {listed}", 1)
        merged.append(Finding(first.level, _merged_key([f.key for f, _ in members]), text))
    return merged
