"""How deep a deployment's dependency graph is: the longest chain of resources that must wait on
each other, one after the other. With enough engine parallelism, `pulumi up` takes about that
many provider operations end to end, whatever the total count.

What makes a resource wait:
- each URN in its recorded `dependencies` (explicit `depends_on` plus every resource whose output
  it takes as an input);
- a dependency on a component is a dependency on every resource under it (the SDK expands it the
  same way), because a component does no work of its own and is "done" only when they are;
- a parent that is itself a unit of work: its URN is known only once the engine has created it,
  so its children cannot even be registered before. A local component parent never blocks.

Units of work, the links of a chain, are custom resources and remote (multi-language)
components such as `kubernetes:yaml/v2:ConfigGroup`, whose provider creates their children
before the component counts as done; the SDK does not expand a dependency on one, and neither
do we. Local components are no links, only groupings.

A record says "remote" only through what the SDK sent: a component registration carries a
`provider` reference only when it is remote (`runtime/resource.py`, `send_provider`). A remote
component left on its default provider is not recognized and counts as local; this program gives
every Kubernetes object its explicit provider.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol


class GraphResource(Protocol):
    """What the depth needs of a resource (`stacks.tools.plan.mock_runtime.RecordedResource` has it)."""

    @property
    def urn(self) -> str: ...
    @property
    def parent(self) -> str | None: ...
    @property
    def custom(self) -> bool: ...
    @property
    def dependencies(self) -> Sequence[str]: ...
    @property
    def provider(self) -> str | None: ...


def is_unit_of_work(resource: GraphResource) -> bool:
    """Custom resources and remote components do work of their own; local components do not."""
    return resource.custom or resource.provider is not None


def waits_on(resources: Iterable[GraphResource]) -> dict[str, set[str]]:
    """Per unit of work (URN), the units of work it waits on (local components expanded)."""
    items = list(resources)
    by_urn = {r.urn: r for r in items}
    children: dict[str, list[str]] = defaultdict(list)
    for r in items:
        if r.parent is not None:
            children[r.parent].append(r.urn)
    expanded: dict[str, frozenset[str]] = {}

    def work_below(component: str) -> frozenset[str]:
        # Iterative, so deeply nested components cannot hit the recursion limit.
        if component in expanded:
            return expanded[component]
        found: set[str] = set()
        stack = list(children.get(component, ()))
        seen: set[str] = set()
        while stack:
            urn = stack.pop()
            if urn in seen:
                continue
            seen.add(urn)
            if is_unit_of_work(by_urn[urn]):
                found.add(urn)
            stack.extend(children.get(urn, ()))
        expanded[component] = frozenset(found)
        return expanded[component]

    edges: dict[str, set[str]] = {}
    for r in items:
        if not is_unit_of_work(r):
            continue
        before: set[str] = set()
        for dependency in r.dependencies:
            target = by_urn.get(dependency)
            if target is None:
                continue  # outside the recorded program (the stack itself): waits on nothing here
            if is_unit_of_work(target):
                before.add(dependency)
            else:
                before |= work_below(dependency)
        parent = by_urn.get(r.parent) if r.parent is not None else None
        if parent is not None and is_unit_of_work(parent):
            before.add(parent.urn)
        before.discard(r.urn)
        edges[r.urn] = before
    return edges


def longest_chain(resources: Iterable[GraphResource]) -> list[str]:
    """The URNs of a longest waiting chain, first to be created first; empty without resources.

    Raises `ValueError` on a cycle (the engine would refuse the program too).
    """
    edges = waits_on(resources)
    return _longest_path(edges)


def dependency_depth(resources: Iterable[GraphResource]) -> int:
    """How many units of work the longest waiting chain holds (0 for none, 1 if none waits)."""
    return len(longest_chain(resources))


def _longest_path(edges: Mapping[str, set[str]]) -> list[str]:
    waiting: dict[str, int] = {urn: 0 for urn in edges}
    dependents: dict[str, list[str]] = defaultdict(list)
    for urn, before in edges.items():
        for dependency in before:
            if dependency in edges:
                waiting[urn] += 1
                dependents[dependency].append(urn)
    ready = deque(sorted(urn for urn, count in waiting.items() if count == 0))
    length: dict[str, int] = {}
    previous: dict[str, str | None] = {}
    done = 0
    while ready:
        urn = ready.popleft()
        done += 1
        best: str | None = None
        for dependency in sorted(edges[urn]):  # sorted: the same chain on every run
            if dependency in length and (best is None or length[dependency] > length[best]):
                best = dependency
        length[urn] = 1 + (length[best] if best is not None else 0)
        previous[urn] = best
        for dependent in dependents[urn]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
    if done != len(edges):
        stuck = sorted(urn for urn, count in waiting.items() if count > 0)
        raise ValueError(f"dependency cycle among {len(stuck)} resources, e.g. {stuck[0]}")
    if not length:
        return []
    end: str | None = max(sorted(length), key=lambda urn: length[urn])
    chain: list[str] = []
    while end is not None:
        chain.append(end)
        end = previous[end]
    return chain[::-1]
