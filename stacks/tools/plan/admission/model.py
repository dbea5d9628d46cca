"""What the admission check places: workloads and the groups of identical pods they create."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PodGroup:
    role: str
    replicas: int
    spec: Mapping[str, Any]


@dataclass(frozen=True)
class Workload:
    kind: str
    namespace: str
    name: str
    groups: tuple[PodGroup, ...]
    obj: Mapping[str, Any]
    problem: str | None = None
    """Why its pods would never be created (e.g. a TrainJob whose runtime is missing)."""

    @property
    def title(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"
