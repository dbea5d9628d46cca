"""How long a fresh `pulumi up` takes: a schedule of timed operations over the plan's resource graph.

We cannot time a real vCenter here, so we model it. Each operation has a duration and may hold
units of a shared capacity while it runs (vCenter's per-host and per-datastore limits on
provisioning operations). Two numbers come out:

- the **bound**: the longest path through the dependency graph, as if everything that may run at
  once did (infinite parallelism, no vCenter queueing): no deployment can be faster;
- the **estimate**: an event-driven simulation that starts an operation as soon as its
  dependencies are done, Pulumi's parallelism (`pulumi up --parallel`) has a free slot and every
  capacity it needs has room, in the order operations became ready (vCenter queues provisioning
  operations that exceed a limit, first come first served; VMware, "Limits on Simultaneous
  Migrations" in *vCenter Server and Host Management*).

This module is pure: operations in, a schedule out. `deploy_time` builds operations from a plan.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Operation:
    """One step of the deployment: a Pulumi resource operation, or work inside a guest it triggers."""

    key: str
    """Unique name (the resource's URN, or `<urn>#<guest step>`)."""
    label: str
    """What a user reads on the critical path, e.g. `clone gpu-workers-worker-1 (linked)`."""
    seconds: float
    depends_on: tuple[str, ...] = ()
    holds: Mapping[str, int] = field(default_factory=dict)
    """Capacity name -> units held while running, e.g. {"host:template": 1, "datastore:ds-1": 1}."""
    engine_slot: bool = True
    """Counts against `pulumi up --parallel` (guest work the engine does not run does not)."""
    kind: str = ""
    """The kind of work, for "what dominates" (e.g. `linked clone`, `add-on rollout`)."""
    pool: str = ""
    """A pool of workers the operation waits for while it holds its engine slot, one unit (a
    provider process's threads: the engine's call is in flight while the provider queues it)."""


@dataclass(frozen=True)
class Schedule:
    """When each operation ran, and what bounds the whole."""

    seconds: float
    """Wall time from the first operation's start to the last one's end."""
    start: dict[str, float]
    end: dict[str, float]
    critical_path: tuple[str, ...]
    """Keys of the chain that ends last: each waited for the one before it (dependency or capacity)."""
    came_from: Mapping[str, str | None] = field(default_factory=dict)
    """What each operation waited for last (the links the critical path follows)."""


class CycleError(ValueError):
    """The operations' dependencies form a cycle (a plan never does; a hand-made graph might)."""


def _index(operations: Sequence[Operation]) -> dict[str, Operation]:
    by_key = {op.key: op for op in operations}
    if len(by_key) != len(operations):
        raise ValueError("operation keys must be unique")
    for op in operations:
        missing = [d for d in op.depends_on if d not in by_key]
        if missing:
            raise ValueError(f"{op.key} depends on unknown operation(s) {missing}")
    return by_key


def _topological(by_key: Mapping[str, Operation]) -> list[str]:
    waiting = {key: len(op.depends_on) for key, op in by_key.items()}
    dependents: dict[str, list[str]] = {key: [] for key in by_key}
    for key, op in by_key.items():
        for dependency in op.depends_on:
            dependents[dependency].append(key)
    ready = sorted(key for key, count in waiting.items() if count == 0)
    order: list[str] = []
    while ready:
        key = ready.pop()
        order.append(key)
        for dependent in dependents[key]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
    if len(order) != len(by_key):
        raise CycleError("dependency cycle among: " + ", ".join(sorted(k for k, n in waiting.items() if n)))
    return order


def critical_path_bound(operations: Sequence[Operation]) -> Schedule:
    """The longest dependency chain: every operation starts the moment its dependencies end."""
    by_key = _index(operations)
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    came_from: dict[str, str | None] = {}
    for key in _topological(by_key):
        op = by_key[key]
        latest = max(op.depends_on, key=lambda d: (end[d], d), default=None)
        start[key] = end[latest] if latest is not None else 0.0
        end[key] = start[key] + op.seconds
        came_from[key] = latest
    return Schedule(
        seconds=max(end.values(), default=0.0),
        start=start,
        end=end,
        critical_path=_walk_back(end, came_from),
        came_from=came_from,
    )


def simulate(
    operations: Sequence[Operation], *, parallel: int | None = None, capacity: Mapping[str, int] | None = None
) -> Schedule:
    """Start each operation when its dependencies are done and a slot and its capacities are free.

    `parallel`: Pulumi's `--parallel` (None: unbounded). `capacity`: units per capacity name; a
    name an operation holds but `capacity` does not list is unlimited. An operation takes what it
    needs in the order the engine and its providers do, holding what it has while it waits for the
    next: an engine slot (first come, first served), then a worker of its `pool` (first come, first
    served), then its `holds` (vCenter's queue, a provider's lock), where operations ready earlier
    are tried first and one that does not fit does not block a later one that does. No look-ahead:
    neither the engine nor vCenter's queue looks ahead.
    """
    by_key = _index(operations)
    _topological(by_key)  # refuse cycles up front
    limits = dict(capacity or {})
    for op in by_key.values():
        for name, units in op.holds.items():
            if name in limits and units > limits[name]:
                raise ValueError(f"{op.key} holds {units} of {name!r}, which has only {limits[name]}")
    used: dict[str, int] = dict.fromkeys(limits, 0)
    slots_used = 0
    waiting = {key: len(op.depends_on) for key, op in by_key.items()}
    dependents: dict[str, list[str]] = {key: [] for key in by_key}
    for key, op in by_key.items():
        for dependency in op.depends_on:
            dependents[dependency].append(key)
    ready_since: dict[str, float] = {key: 0.0 for key, count in waiting.items() if count == 0}
    # Three waiting rooms, one per thing an operation waits for; the first two are first come,
    # first served (every operation takes one unit of the same thing), the last is tried in order.
    for_slot: deque[str] = deque()
    for_pool: dict[str, deque[str]] = {}
    for_holds: list[str] = []
    # Operations that did not fit, by the capacity that refused them: only room freed there can
    # let them start, so they are tried again only then (the same schedule as trying every
    # waiting operation at every event, without the quadratic scan at 512 workers).
    refused: dict[str, list[str]] = {}
    freed: set[str] = set()
    running: list[tuple[float, str]] = []
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    blocked_by: dict[str, str | None] = {}
    last_finished: str | None = None
    now = 0.0

    def to_pool(key: str) -> None:
        pool = by_key[key].pool
        if pool and pool in limits:
            for_pool.setdefault(pool, deque()).append(key)
        else:
            for_holds.append(key)

    def arrive(keys: list[str]) -> None:
        for key in sorted(keys, key=lambda k: (ready_since[k], k)):
            if by_key[key].engine_slot and parallel is not None:
                for_slot.append(key)
            else:
                to_pool(key)

    def refusing(op: Operation) -> str | None:
        """The first capacity without room for `op`, or None when it fits."""
        for name, units in op.holds.items():
            if name in limits and used[name] + units > limits[name]:
                return name
        return None

    arrive(list(ready_since))
    while True:
        while for_slot and slots_used < (parallel or 0):
            slots_used += 1
            to_pool(for_slot.popleft())
        for pool, room in for_pool.items():
            while room and used[pool] < limits[pool]:
                used[pool] += 1
                for_holds.append(room.popleft())
        for name in freed:
            for_holds += refused.pop(name, [])
        freed.clear()
        for_holds.sort(key=lambda k: (ready_since[k], k))
        for key in for_holds:
            op = by_key[key]
            full = refusing(op)
            if full is not None:
                refused.setdefault(full, []).append(key)
                continue
            start[key] = now
            # What it waited for last: its latest dependency, or (if it queued) what just freed room.
            latest = max(op.depends_on, key=lambda d: (end[d], d), default=None)
            queued = latest is None or end[latest] < now
            blocked_by[key] = last_finished if queued and now > 0 else latest
            for name, units in op.holds.items():
                if name in limits:
                    used[name] += units
            if op.engine_slot and parallel is None:
                slots_used += 1
            heapq.heappush(running, (now + op.seconds, key))
        for_holds = []
        if not running:
            break
        now, key = heapq.heappop(running)
        finished = [key]
        while running and running[0][0] == now:
            finished.append(heapq.heappop(running)[1])
        newly_ready = []
        for key in sorted(finished):
            op = by_key[key]
            end[key] = now
            for name, units in op.holds.items():
                if name in limits:
                    used[name] -= units
                    freed.add(name)
            if op.pool and op.pool in limits:
                used[op.pool] -= 1
            slots_used -= op.engine_slot
            last_finished = key
            for dependent in dependents[key]:
                waiting[dependent] -= 1
                if waiting[dependent] == 0:
                    ready_since[dependent] = now
                    newly_ready.append(dependent)
        arrive(newly_ready)
    if len(end) != len(by_key):
        stuck = sorted(set(by_key) - set(end))
        raise ValueError(f"operations that can never start (capacity too small?): {stuck[:5]}")
    return Schedule(
        seconds=max(end.values(), default=0.0),
        start=start,
        end=end,
        critical_path=_walk_back(end, blocked_by),
        came_from=blocked_by,
    )


def extended(schedule: Schedule, later: Sequence[Operation]) -> Schedule:
    """`schedule` with operations that wait for nothing but their dependencies (no engine slot, no
    capacity: a guest's boot and join), each started when its dependencies end. They delay nobody,
    so this is what simulating them with the rest gives, without simulating the rest again."""
    start, end, came_from = dict(schedule.start), dict(schedule.end), dict(schedule.came_from)
    for op in later:
        if op.engine_slot or op.holds or op.pool:
            raise ValueError(f"{op.key} takes an engine slot or a capacity: simulate it with the rest")
    by_key = {op.key: op for op in later}
    for key in _topological({**{k: Operation(k, k, 0) for k in end}, **by_key}):
        if key not in by_key:
            continue
        op = by_key[key]
        latest = max(op.depends_on, key=lambda d: (end[d], d), default=None)
        start[key] = end[latest] if latest is not None else 0.0
        end[key] = start[key] + op.seconds
        came_from[key] = latest
    return Schedule(
        seconds=max(end.values(), default=0.0),
        start=start,
        end=end,
        critical_path=_walk_back(end, came_from),
        came_from=came_from,
    )


def _walk_back(end: Mapping[str, float], came_from: Mapping[str, str | None]) -> tuple[str, ...]:
    if not end:
        return ()
    key: str | None = max(end, key=lambda k: (end[k], k))
    path: list[str] = []
    seen: set[str] = set()
    while key is not None and key not in seen:
        path.append(key)
        seen.add(key)
        key = came_from.get(key)
    return tuple(reversed(path))
