"""How long a change to a running stack takes (`plan --against`), from the deployment model's steps.

The fresh-deployment estimate (`deploy_time`) answers "how long does a new stack take"; a change to
a running one is another shape: each replaced node is drained, deleted, cloned, powered on, booted,
joined and settled, and the rolling-update gates make the next node of its chain wait until then
(`components.k8s.rollout.rollout`; one chain per `gpuWorkers.maxUnavailable`). So the change takes the
longest chain's sum of its nodes' times; nodes outside any chain (added, removed, rebooted) go
beside the chains. Every step is a `Durations` field, so `--durations` tunes this too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from stacks.tools.plan.deploy_time.durations import Durations
from stacks.tools.plan.deploy_time.words import about, format_seconds
from stacks.tools.plan.diff import CONTROL_PLANE_PREFIX, READY, VM, PlanDiff, planned


@dataclass(frozen=True)
class ChangeTime:
    seconds: float
    chains: list[list[str]]
    """Node (VM) names, in the order they go; a node outside any chain is a chain of one."""
    steps: dict[str, list[tuple[str, float]]]
    """Each disrupted node's steps and their seconds."""
    verdicts: dict[str, str]

    def chain_seconds(self, chain: list[str]) -> float:
        return sum(seconds for node in chain for _, seconds in self.steps[node])

    def lines(self) -> list[str]:
        if not self.chains:
            return ["rolling change: none: no node is replaced, rebooted, power-cycled, added or removed"]
        replaced = [node for node, verdict in self.verdicts.items() if verdict == "replaced"]
        longest = max(self.chains, key=self.chain_seconds)
        what = (
            f"{len(replaced)} node(s) replaced one after another"
            if replaced and len(self.chains) == 1
            else f"{len(self.steps)} node(s) changed in {len(self.chains)} chain(s) side by side"
        )
        node = longest[0]
        each = ", ".join(f"{step} {format_seconds(seconds)}" for step, seconds in self.steps[node])
        out = [
            f"rolling change: {about(self.seconds)}, this change's own time (not the fresh deployment's): "
            f"{what}; {node} ({self.verdicts[node]}) takes {format_seconds(self.chain_seconds([node]))}: {each}"
        ]
        if len(self.chains) == 1:
            out[0] = out[0].replace(f"; {node} ({self.verdicts[node]}) takes ", ", each ", 1)
        for chain in sorted(self.chains, key=self.chain_seconds, reverse=True)[:3]:
            shown = chain if len(chain) <= 4 else [*chain[:2], "...", chain[-1]]
            out.append(f"  chain of {len(chain)}: {' -> '.join(shown)}: {format_seconds(self.chain_seconds(chain))}")
        if len(self.chains) > 3:
            out.append(f"  and {len(self.chains) - 3} shorter chain(s)")
        return out


def _node_steps(verdict: str, linked: bool, init_alone: bool, d: Durations) -> list[tuple[str, float]]:
    clone = ("linked clone", d.linked_clone) if linked else ("full clone", d.full_clone)
    join = ("kubeadm init", d.kubeadm_init) if init_alone else ("kubeadm join", d.kubeadm_join)
    come_up = [clone, ("power-on", d.power_on), ("boot", d.guest_boot), join]
    if verdict == "replaced":
        return [("drain", d.drain), ("delete", d.vm_destroy), *come_up, ("settle", d.node_settle)]
    if verdict == "added":
        return come_up
    if verdict == "removed":
        return [("drain", d.drain), ("delete", d.vm_destroy)]
    if verdict in ("rebooted", "power-cycled"):
        return [("shutdown", d.guest_shutdown), ("power-on", d.power_on), ("boot", d.guest_boot)]
    return []


def change_time(diff: PlanDiff, after: Iterable[object], durations: Durations | None = None) -> ChangeTime:
    """The change's own duration: `diff` from `plan_diff.diff_plans`, `after` the new plan's resources."""
    d = durations or Durations()
    new = {r.urn: r for r in planned(after)}
    vms = {r.name: r for r in new.values() if r.type == VM}
    init_vms = {new[dep].name for r in new.values() if r.type == READY for dep in r.dependencies if dep in new}
    control_plane = [name for name in vms if name.startswith(CONTROL_PLANE_PREFIX)]
    steps: dict[str, list[tuple[str, float]]] = {}
    verdicts: dict[str, str] = {}
    for change in diff.nodes:
        vm = vms.get(change.node)
        clone = vm.inputs.get("clone") if vm else None
        linked = bool(clone.get("linkedClone")) if isinstance(clone, Mapping) else False
        # A replaced init node alone starts a new cluster; with other members it joins them.
        init_alone = change.node in init_vms and len(control_plane) == 1
        node_steps = _node_steps(change.verdict, linked, init_alone, d)
        if node_steps:
            steps[change.node] = node_steps
            verdicts[change.node] = change.verdict
    chains = _chains(steps, diff.rolled_after)
    seconds = max((sum(s for node in chain for _, s in steps[node]) for chain in chains), default=0.0)
    return ChangeTime(seconds=seconds, chains=chains, steps=steps, verdicts=verdicts)


def _chains(steps: Mapping[str, object], after: Mapping[str, str]) -> list[list[str]]:
    """Follow each rolled node's predecessor; every other disrupted node is a chain of its own."""
    successors = {previous: node for node, previous in after.items() if previous in steps}
    heads = [node for node in sorted(steps) if after.get(node, "") not in steps]
    chains = []
    for head in heads:
        chain = [head]
        while chain[-1] in successors:
            chain.append(successors[chain[-1]])
        chains.append(chain)
    return chains
