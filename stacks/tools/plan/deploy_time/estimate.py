"""The deployment's estimate: vCenter's schedule of a plan's operations, with the engine's terms.

`durations` says what each resource costs, `model` schedules operations, `engine` adds what
Pulumi itself adds (provider threads, switch joins, `--parallel`, checkpoints); this module puts
them together into what `plan` prints and `--json` carries.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from stacks.tools.plan.deploy_time.durations import Durations, operations, resources_from_plan
from stacks.tools.plan.deploy_time.engine import (
    SHIPPED,
    EngineSettings,
    Term,
    final_save_seconds,
    mean_save_seconds,
    term_lines,
    terms,
    with_engine,
)
from stacks.tools.plan.deploy_time.model import Operation, Schedule, critical_path_bound, extended, simulate
from stacks.tools.plan.deploy_time.preview_steps import ChangedSteps
from stacks.tools.plan.deploy_time.words import estimate_in_words, format_seconds, ratio_in_words


@dataclass(frozen=True)
class Estimate:
    pulumi_up: Schedule
    """`pulumi up` alone (the engine's operations), with vCenter's limits and the engine's terms."""
    bound: Schedule
    """The same operations with infinite parallelism and no limits: vCenter's bound."""
    ready: Schedule
    """Including the workers' boot and join: when the cluster can run training."""
    labels: dict[str, str]
    seconds: dict[str, float]
    """Each operation's own duration (with the checkpoint saves its step waits for)."""
    kinds: dict[str, str]
    vcenter: Schedule | None = None
    """`pulumi up` with vCenter's limits only (no engine terms); None when the engine is not modelled."""
    engine: EngineSettings | None = None
    terms: tuple[Term, ...] = ()
    """The engine's terms, each with the least time it alone forces (`engine`)."""

    @property
    def ratio(self) -> float:
        return self.pulumi_up.seconds / self.bound.seconds if self.bound.seconds else 1.0

    @property
    def held_back_by(self) -> Term | None:
        """The engine term that alone takes longer than vCenter's schedule, the largest; None if none does."""
        floor = self.vcenter.seconds if self.vcenter is not None else self.bound.seconds
        over = [t for t in self.terms if t.floor_seconds > floor]
        return max(over, key=lambda t: t.floor_seconds) if over else None

    def path_labels(self, schedule: Schedule) -> list[str]:
        """The critical path's steps that take time, in order; steps of one label in a row (objects
        of one name in two namespaces, say) as one step with their count, never a step repeated."""
        labels = [self.labels[key] for key in schedule.critical_path if self.seconds[key] > 0]
        steps: list[tuple[str, int]] = []
        for label in labels:
            if steps and steps[-1][0] == label:
                steps[-1] = (label, steps[-1][1] + 1)
            else:
                steps.append((label, 1))
        return [label if count == 1 else f"{label} (x{count})" for label, count in steps]

    def dominant(self, schedule: Schedule) -> list[tuple[str, float]]:
        """Time on the critical path per kind of operation (the label's first words), largest first."""
        totals: dict[str, float] = {}
        for key in schedule.critical_path:
            totals[self.kinds[key]] = totals.get(self.kinds[key], 0.0) + self.seconds[key]
        return sorted(((k, v) for k, v in totals.items() if v > 0), key=lambda kv: (-kv[1], kv[0]))

    def as_dict(self) -> dict[str, Any]:
        steps = [(self.kinds[key], self.seconds[key]) for key in self.pulumi_up.critical_path]
        held = self.held_back_by
        words = estimate_in_words(self.pulumi_up.seconds, self.ready.seconds, steps, self.ratio)
        found: dict[str, Any] = {
            "inWords": words + (f"; held back most by the engine's {held.name}" if held else ""),
            "pulumiUpSeconds": round(self.pulumi_up.seconds, 1),
            "boundSeconds": round(self.bound.seconds, 1),
            "ratio": round(self.ratio, 2),
            "readyForTrainingSeconds": round(self.ready.seconds, 1),
            "criticalPath": self.path_labels(self.pulumi_up),
            "readyCriticalPath": self.path_labels(self.ready),
            "dominant": [{"operation": k, "seconds": round(v, 1)} for k, v in self.dominant(self.pulumi_up)],
        }
        if self.engine is not None and self.vcenter is not None:
            found["engine"] = {
                "settings": self.engine.as_dict(),
                "vcenterOnlySeconds": round(self.vcenter.seconds, 1),
                "terms": [
                    {"term": t.name, "floorSeconds": round(t.floor_seconds, 1), "detail": t.detail} for t in self.terms
                ],
            }
        return found


def _capacity(d: Durations, ops: Iterable[Operation]) -> dict[str, int]:
    names = {name for op in ops for name in op.holds}
    return {name: d.datastore_units if name.startswith("datastore:") else d.host_units for name in names}


def estimate(
    entries: Iterable[Any],
    durations: Durations | None = None,
    engine: EngineSettings | None = SHIPPED,
    *,
    changed: ChangedSteps | None = None,
) -> Estimate:
    """The deployment's estimate; `engine=None` models vCenter alone (unbounded `--parallel` unless
    `durations.parallel` says otherwise). `changed`: a run on a running stack, from its preview
    (preview_steps.py): only the changed resources' operations take time and save checkpoints;
    None: a fresh deploy, every resource created."""
    d = durations or Durations()
    resources = resources_from_plan(entries)
    ops = operations(resources, d)
    keys = None if changed is None else changed.urns
    if keys is not None:
        # A `same` step waits for its dependencies like any other, and does nothing itself; a guest's
        # boot and join (`<urn>#join`) happen again only when its VM is changed.
        ops = [op if op.key.split("#", 1)[0] in keys else replace(op, seconds=0.0, holds={}) for op in ops]
    engine_ops = [op for op in ops if op.engine_slot]
    capacity = _capacity(d, ops)
    vcenter = simulate(engine_ops, parallel=d.parallel, capacity=capacity)
    bound = critical_path_bound(engine_ops)
    guest = [op for op in ops if not op.engine_slot]
    if engine is None:
        ready = extended(vcenter, guest)
        return Estimate(
            vcenter,
            bound,
            ready,
            {op.key: op.label for op in ops},
            {op.key: op.seconds for op in ops},
            {op.key: op.kind for op in ops},
        )
    if d.parallel is not None and engine.parallel is None:
        engine = replace(engine, parallel=d.parallel)
    types = {r.urn: r.type for r in resources}
    inputs = {r.urn: r.inputs for r in resources}
    save_s = mean_save_seconds(types.values(), engine, whole=changed is not None)
    timed, engine_capacity = with_engine(ops, types, inputs, engine, save_s, keys)
    capacity |= engine_capacity
    found = tuple(terms(ops, types, inputs, len(resources), engine, keys, None if changed is None else changed.steps))
    pulumi_up = simulate([op for op in timed if op.engine_slot], parallel=engine.effective_parallel, capacity=capacity)
    ready = extended(pulumi_up, guest)
    # Saves are one queue (the snapshot manager): the run lasts at least all of them; a skipped-
    # checkpoint run ends with its one save.
    saves = next((t.floor_seconds for t in found if t.name == "checkpoints"), 0.0)
    # Likewise the plugin's CPU and the step loop: work that cannot go faster than its rate, done
    # while vCenter works (so a floor, not an addition).
    rates = max((t.floor_seconds for t in found if t.name in ("plugin CPU", "Check/Diff")), default=0.0)
    tail = final_save_seconds(types.values(), engine)
    pulumi_up = replace(pulumi_up, seconds=max(pulumi_up.seconds + tail, saves, rates))
    ready = replace(ready, seconds=max(ready.seconds, pulumi_up.seconds))
    return Estimate(
        pulumi_up=pulumi_up,
        bound=bound,
        ready=ready,
        labels={op.key: op.label for op in timed},
        seconds={op.key: op.seconds for op in timed},
        kinds={op.key: op.kind for op in timed},
        vcenter=vcenter,
        engine=engine,
        terms=found,
    )


def summary_lines(result: Estimate, path_items: int = 6) -> list[str]:
    """The lines `plan` prints: the estimate in words first, then the model's figures, the engine's
    terms and the critical path."""
    path = result.path_labels(result.pulumi_up)
    shown = path if len(path) <= path_items else [*path[:2], "...", *path[-(path_items - 3) :]]
    lines = [
        result.as_dict()["inWords"],
        f"  pulumi up {format_seconds(result.pulumi_up.seconds)}, bound {format_seconds(result.bound.seconds)} "
        f"({ratio_in_words(result.ratio)}), ready for training {format_seconds(result.ready.seconds)}; most time in: "
        + ", ".join(f"{kind} {format_seconds(s)}" for kind, s in result.dominant(result.pulumi_up)[:3]),
    ]
    if result.engine is not None and result.vcenter is not None:
        lines.append(f"  vCenter's limits alone: {format_seconds(result.vcenter.seconds)}")
        lines += term_lines(result.engine, result.terms)
    lines.append("  critical path: " + " -> ".join(shown))
    return lines
