"""Which of a plan's resources a run of `pulumi up` changes, from the run's own preview.

A day-two run registers every resource again, but only its non-`same` steps cost anything beyond
Check and Diff: a `same` step calls no provider operation (pulumi/pulumi pkg/resource/deploy/
step.go, `SameStep.Apply`) and writes no checkpoint unless the resource's record changed
(pkg/backend/snapshot.go, `sameSnapshotMutation.mustWrite`). So the estimate of such a run counts
the changed steps' operations and checkpoints, and the Check/Diff of every registration.

`pulumi preview --json` lists its steps (`steps[].op`, `steps[].urn`: sdk/go/common/apitype
`PreviewStep`) and counts them (`changeSummary`). A changed resource is found in the plan by URN;
a step whose URN the plan lacks (a delete: the program no longer registers it) or a preview with
counts only is counted as that many of the plan's costliest operations, an upper bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

COSTLESS_OPS = frozenset({"same"})
"""Step kinds that call no provider operation and write no checkpoint (module docstring)."""


@dataclass(frozen=True)
class PreviewChange:
    """What a preview says a run does: step counts per kind, and the URNs its changed steps touch."""

    ops: Mapping[str, int]
    urns: frozenset[str]
    """URNs of the non-`same` steps (empty when the preview gave counts only)."""

    @property
    def steps(self) -> int:
        """All the run's steps (registrations), `same` ones included."""
        return sum(self.ops.values())

    @property
    def changed_steps(self) -> int:
        return sum(n for op, n in self.ops.items() if op not in COSTLESS_OPS)


@dataclass(frozen=True)
class ChangedSteps:
    """The part of a plan a run changes: the estimate's `changed`."""

    urns: frozenset[str]
    """Plan resources whose steps cost operations."""
    steps: int
    """Changed steps, each of which saves the state on a self-managed backend (a replace is
    several: create-replacement, replace, delete-replaced)."""
    note: str
    """How they were found, in words."""


def preview_change(preview: Mapping[str, Any]) -> PreviewChange:
    """Step counts (its `changeSummary`, or counted from `steps` when that is missing) and the
    changed steps' URNs. Raises TypeError/ValueError/AttributeError on a document of another shape."""
    counts: dict[str, int] = {}
    urns: set[str] = set()
    for step in preview.get("steps") or []:
        op = str(step.get("op", ""))
        counts[op] = counts.get(op, 0) + 1
        if op not in COSTLESS_OPS and step.get("urn"):
            urns.add(str(step["urn"]))
    summary = preview.get("changeSummary")
    ops = {str(k): int(v) for k, v in summary.items()} if isinstance(summary, Mapping) and summary else counts
    return PreviewChange(ops=ops, urns=frozenset(urns))


def changed_in_plan(change: PreviewChange, resources: Iterable[Any], seconds: Mapping[str, float]) -> ChangedSteps:
    """The plan's resources `change` touches. `seconds`: each resource's operation (URN -> s), to
    stand the costliest ones in for changed steps the plan cannot name."""
    planned = {str(getattr(r, "urn", None) or r["urn"]) for r in resources}
    found = change.urns & planned
    unnamed = max(0, change.changed_steps - len(found)) if not change.urns else len(change.urns - planned)
    costliest = sorted((urn for urn in seconds if urn in planned and urn not in found), key=lambda u: (-seconds[u], u))
    stand_ins = frozenset(costliest[:unnamed])
    note = f"{change.changed_steps} of {change.steps} steps change"
    if stand_ins:
        note += f"; {len(stand_ins)} the plan cannot name, counted as its costliest operations"
    return ChangedSteps(urns=found | stand_ins, steps=change.changed_steps, note=note)
