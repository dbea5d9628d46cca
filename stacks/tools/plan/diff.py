"""`plan --against OLD_STACK_FILE`: what a change does to each node, before `pulumi preview`.

Both stack files are planned under the mock runtime; resources are matched by URN and their inputs
compared. What a change of input does is the provider's rule, written down here with its source:
- a VM is *replaced* when anything under `clone` but its timeout changes (terraform-provider-vsphere
  marks the clone block ForceNew: `resource_vsphere_virtual_machine.go`, `clone` schema);
  this stack replaces VMs delete-first, so a replaced node is down from its drain until the new VM
  has booted and joined;
- a VM *reboots* for a CPU or memory change (the provider shuts a VM down for changes that need it
  off when hot-add is not enabled, and ours never enable it: vGPU VMs do not support hot-add);
- first-boot data (`guestinfo.*` in extraConfig) is ignored after creation: a change there changes
  nothing on an existing node by itself (a new Kubernetes version rolls the node through its gate);
- a vGPU profile change shuts the VM down through VMware Tools and powers it on again;
- other input changes update in place without taking the node down.

"Down at once" is the worst case the plan allows: nodes whose disruptive changes are not ordered
by a dependency between them can all be down together (Pulumi runs independent steps in parallel).
A node whose rolling-update gate has a new generation or Kubernetes version is *rolled*: replaced (the gate's replacement
replaces its VM), and only once the node before it is back (`components.k8s.rollout.rollout`), so rolled
nodes form one chain per `gpuWorkers.maxUnavailable`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from stacks.tools.plan.mock_runtime import unwrap

VM = "vsphere:index/virtualMachine:VirtualMachine"
VGPU = "gpucluster:vsphere:VgpuAttachment"
NODE_DRAIN = "gpucluster:kubernetes:NodeDrain"
ROLLOUT_GATE = "gpucluster:kubernetes:RolloutGate"
CONTROL_PLANE_MEMBER = "gpucluster:kubernetes:ControlPlaneMember"
_FIRST_BOOT_KEYS = ("guestinfo.",)
_REBOOT_KEYS = ("numCpus", "memory")

Verdict = Literal["unchanged", "updated in place", "rebooted", "power-cycled", "replaced", "added", "removed"]
_DISRUPTIVE: frozenset[str] = frozenset({"rebooted", "power-cycled", "replaced", "removed"})


@dataclass(frozen=True)
class PlannedResource:
    urn: str
    type: str
    name: str
    dependencies: tuple[str, ...]
    inputs: Mapping[str, Any]
    ignore_changes: tuple[str, ...] = ()


@dataclass
class NodeChange:
    node: str
    """The VM's resource name, e.g. `gpu-workers-worker-1`."""
    verdict: Verdict
    reasons: list[str] = field(default_factory=list)


@dataclass
class PlanDiff:
    nodes: list[NodeChange]
    notes: list[str]
    down_at_once: int
    rolled_after: dict[str, str] = field(default_factory=dict)
    """Rolled node (VM name) -> the rolled node it goes after ("" for the first of a chain)."""

    def lines(self) -> list[str]:
        width = max((len(change.node) for change in self.nodes), default=0)
        out = [
            f"{change.node:<{width}}  {change.verdict}" + (f": {'; '.join(change.reasons)}" if change.reasons else "")
            for change in self.nodes
        ]
        out += [f"note: {note}" for note in self.notes]
        out.append(f"worst case: {self.down_at_once} node(s) down at once")
        return out


def planned(entries: Iterable[Any]) -> list[PlannedResource]:
    """`RecordedResource`s (or `resources.json` entries) as the differ needs them."""
    found = []
    for entry in entries:
        get = entry.get if isinstance(entry, Mapping) else lambda key, e=entry: getattr(e, key, None)
        found.append(
            PlannedResource(
                urn=str(get("urn")),
                type=str(get("type")),
                name=str(get("name")),
                dependencies=tuple(get("dependencies") or ()),
                inputs=unwrap(get("inputs") or {}),  # a secret's change is a change too
                ignore_changes=tuple(get("ignore_changes") or ()),
            )
        )
    return found


def _flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, child in value.items():
            yield from _flatten(child, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and prefix:
        # Pulumi's property paths index lists as `disks[0].size` (what ignoreChanges names).
        for index, child in enumerate(value):
            yield from _flatten(child, f"{prefix}[{index}]")
    else:
        yield prefix, value


def changed_paths(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    a, b = dict(_flatten(old)), dict(_flatten(new))
    return sorted(path for path in a.keys() | b.keys() if a.get(path) != b.get(path))


def _vm_verdict(paths: Sequence[str], ignored: Sequence[str] = ()) -> tuple[Verdict, list[str]]:
    # A VM with a rolling-update gate ignores what its generation covers: only a new VM takes it.
    held = [p for p in paths if any(p == i or p.startswith((f"{i}.", f"{i}[")) for i in ignored)]
    if held:
        verdict, reasons = _vm_verdict([p for p in paths if p not in held])
        return verdict, [f"{', '.join(held)} changed: only a new VM takes it (its rolling-update gate)", *reasons]
    replace = [p for p in paths if p.startswith("clone.") and p != "clone.timeout"]
    if replace:
        return "replaced", [f"{', '.join(replace)} changed (the provider replaces the VM)"]
    first_boot = [p for p in paths if any(p.startswith(f"extraConfig.{k}") for k in _FIRST_BOOT_KEYS)]
    reboot = [p for p in paths if p in _REBOOT_KEYS]
    rest = [p for p in paths if p not in first_boot and p not in reboot]
    reasons = []
    if first_boot:
        reasons.append("first-boot data changed; ignored on an existing VM (it reads it once)")
    if reboot:
        return "rebooted", [*reasons, f"{', '.join(reboot)} changed (the VM is shut down for it)"]
    if rest:
        return "updated in place", [*reasons, f"{', '.join(rest)} changed"]
    return "unchanged", reasons


def diff_plans(before: Iterable[Any], after: Iterable[Any], notes: Sequence[str] = ()) -> PlanDiff:
    old = {r.urn: r for r in planned(before)}
    new = {r.urn: r for r in planned(after)}
    changes: dict[str, NodeChange] = {}
    for urn in sorted(old.keys() | new.keys()):
        o, n = old.get(urn), new.get(urn)
        resource = n or o
        assert resource is not None
        if resource.type != VM:
            continue
        if o is None:
            changes[resource.name] = NodeChange(resource.name, "added")
        elif n is None:
            guards = {
                r.type for r in old.values() if r.type in (NODE_DRAIN, CONTROL_PLANE_MEMBER) and urn in r.dependencies
            }
            if CONTROL_PLANE_MEMBER in guards:
                reason = "drained, removed from the cluster and its etcd member removed (quorum checked) first"
            elif guards:
                reason = "drained and removed from the cluster first"
            else:
                reason = "not drained: no guard depends on it"
            changes[resource.name] = NodeChange(resource.name, "removed", [reason])
        else:
            verdict, reasons = _vm_verdict(changed_paths(o.inputs, n.inputs), n.ignore_changes)
            changes[resource.name] = NodeChange(resource.name, verdict, reasons)
    for urn in sorted(old.keys() & new.keys()):
        o, n = old[urn], new[urn]
        if o.type != VGPU or o.inputs.get("profiles") == n.inputs.get("profiles"):
            continue
        vm = next((dep for dep in n.dependencies if new.get(dep) and new[dep].type == VM), None)
        change = changes.get(new[vm].name) if vm else None
        if change is not None and change.verdict not in ("replaced", "removed", "added"):
            change.verdict = "power-cycled"
            change.reasons.append(
                f"vGPU profiles {o.inputs.get('profiles')} -> {n.inputs.get('profiles')} (shut down through Tools)"
            )
    rolled = _rolled_nodes(changes, old, new)
    for name, (previous, _, what) in rolled.items():
        # Its gate is replaced, and the VM (whose datastore_path carries the gate's id) with it.
        changes[name].verdict = "replaced"
        changes[name].reasons.append(
            f"rolled: its {what} changed, so a new VM with fresh first-boot data, drained first"
            + (f", once {previous} is back" if previous else "")
        )
    notes = [*notes, *_init_node_notes(changes, new)]
    rolled_after = {name: vm for name, (_, vm, _) in rolled.items()}
    return PlanDiff(
        nodes=sorted(changes.values(), key=lambda c: c.node),
        notes=notes,
        down_at_once=_down_at_once(changes, old, new, rolled_after),
        rolled_after=rolled_after,
    )


def _rolled_nodes(
    changes: Mapping[str, NodeChange], old: Mapping[str, PlannedResource], new: Mapping[str, PlannedResource]
) -> dict[str, tuple[str, str, str]]:
    """Nodes (neither added nor removed) whose gate has a new generation or Kubernetes version, to the
    node whose settle their gate waits for, as its node name and VM resource name (empty when that one
    is not changing), and what changed."""
    gates = {}
    for name in changes:
        vm = next((r for r in new.values() if r.type == VM and r.name == name), None)
        gate = next((new[d] for d in (vm.dependencies if vm else ()) if d in new and new[d].type == ROLLOUT_GATE), None)
        if gate is not None:
            gates[name] = gate
    vm_of_node = {str(gate.inputs.get("node_name")): name for name, gate in gates.items()}
    rolled: dict[str, tuple[str, str]] = {}
    for name, gate in gates.items():
        before = old.get(gate.urn)
        if changes[name].verdict in ("added", "removed") or before is None:
            continue
        what = [label for key, label in (("generation", "generation"), ("kubernetes_version", "Kubernetes version"))
                if before.inputs.get(key) != gate.inputs.get(key)]  # fmt: skip
        if what:
            rolled[name] = (str(gate.inputs.get("previous_node") or ""), " and ".join(what))
    # A gate waits for the node before it only when that node changes too (its settle then waits).
    return {
        name: (previous, vm_of_node[previous], what) if vm_of_node.get(previous) in rolled else ("", "", what)
        for name, (previous, what) in rolled.items()
    }


READY = "gpucluster:kubernetes:ApiServerReady"
CONTROL_PLANE_PREFIX = "control-plane-"
"""The control-plane pool's VM resource names (`NodePool("control-plane", ...)` in `__main__.py`)."""


def _init_node_notes(changes: Mapping[str, NodeChange], new: Mapping[str, PlannedResource]) -> list[str]:
    """The VM the readiness check waits for ran `kubeadm init`. A new VM in its place joins the other
    control-plane members when one serves (the bootstrap probes them first); alone, it starts a new
    cluster with an empty etcd, and the engine re-creates only resources that depend on a replaced
    one through an input, which no Kubernetes object does: state keeps add-ons the new cluster lacks
    until `pulumi refresh`."""
    ready = [r for r in new.values() if r.type == READY]
    init_vms = {new[d].name for r in ready for d in r.dependencies if d in new and new[d].type == VM}
    members = [r for r in new.values() if r.type == VM and r.name.startswith(CONTROL_PLANE_PREFIX)]
    notes = []
    for node in sorted(init_vms):
        if changes.get(node) is None or changes[node].verdict != "replaced":
            continue
        if len(members) > 1:
            notes.append(
                f"{node} ran `kubeadm init`; it is replaced first, and its new VM joins the other members "
                "(they keep serving) instead of starting a new cluster"
            )
        else:
            notes.append(
                f"{node} runs `kubeadm init` and is replaced: the new VM starts a new cluster with an empty etcd "
                "(every workload, object and joined worker of the old one is gone). After `pulumi up`, run "
                "`pulumi refresh` and `pulumi up` again so the add-ons are applied to it; with several "
                "control-plane nodes the others keep the cluster (docs/environments.md, day two)"
            )
    return notes


def _down_at_once(
    changes: Mapping[str, NodeChange],
    old: Mapping[str, PlannedResource],
    new: Mapping[str, PlannedResource],
    rolled: Mapping[str, str],
) -> int:
    """Disruptive nodes, those ordered by a dependency counted as one chain: a VM's own dependencies,
    and a rolled node's wait for the node before it (`rolled`: VM name to that node's VM name)."""
    disruptive = {name for name, change in changes.items() if change.verdict in _DISRUPTIVE}
    if not disruptive:
        return 0
    by_name = {r.name: r for r in (*old.values(), *new.values()) if r.type == VM}
    parent = {name: name for name in disruptive}

    def root(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    for name in disruptive:
        for dep in by_name[name].dependencies:
            dep_resource = new.get(dep) or old.get(dep)
            if dep_resource is not None and dep_resource.name in disruptive:
                parent[root(name)] = root(dep_resource.name)
    for name, previous in rolled.items():  # a rolled node goes only once the one it waits for is back
        if previous in parent:
            parent[root(name)] = root(previous)
    return len({root(name) for name in disruptive})
