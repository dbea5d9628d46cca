"""What `plan --graph` draws, as data: boxes, arrows in deployment order, and the critical path.

Every resource is folded into the nearest of our own components (`gpucluster:*`: RdmaFabric,
NodePool, ClusterBootstrap, ...), so a ConfigGroup's dependency on the MPI Operator shows as
"MpiOperator, then TrainingJobs", not as an arrow between two anonymous groups. Resources outside
any of our components stay boxes of their own (the VM folder, the API server's readiness).

Per-node plumbing sits outside the components too: a node's rolling-update gate, generation and
settle, its drain guard, its etcd-member guard, each carrying the node's `node_name`. By default it
is folded into the box of its node's VM (the node pool), and only what the pool's own resources
wait for draws arrows: the plumbing's waits (a drain waits for the API server, a settle for the
node before it) are about day two and teardown, and at prod's size they are hundreds of arrows.
`detail=True` keeps every plumbing resource a box of its own, with all its arrows.

An arrow points from what is created first to what waits for it (dependency -> dependent). The
critical path is the deployment model's (`deploy_time`): its steps' boxes and the arrows between
them are marked; two steps one after another with no dependency between them (a clone queued for
the template host's capacity) get an arrow of their own, marked as a capacity wait.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from stacks.tools.plan.mock_runtime import RecordedResource

OUR_COMPONENTS = "gpucluster:"
"""Type-token prefix of the components this project defines (STYLE.md: `gpucluster:<module>:<Type>`)."""

VM = "vsphere:index/virtualMachine:VirtualMachine"
_STACK = "pulumi:pulumi:Stack"
NODE_KEY = "node_name"
"""The input every per-node resource carries (components/k8s: rollout, drain and etcd-member guards)."""

PLUMBING_WORDS = {
    "NodeDrain": "drain",
    "ControlPlaneMember": "etcd member",
    "RolloutGate": "rollout gate",
    "RolloutGeneration": "generation",
    "RolloutSettle": "settle",
    "NodeJoined": "join wait",
    "GuestinfoScrub": "guestinfo scrub",
    "InitPkiDelivery": "sealed key delivery",
}
"""How a folded plumbing type is named in its node's box; a type not listed is named as it is."""


@dataclass
class Box:
    urn: str
    name: str
    kind: str
    """The type's last part: `NodePool`, `Folder`, ..."""
    vms: int = 0
    folded: set[str] = field(default_factory=set)
    """Per-node plumbing types folded into this box (their last part)."""
    critical: bool = False

    def label(self) -> str:
        lines = [self.name, f"{self.kind}: {self.vms} VM{'s' if self.vms != 1 else ''}" if self.vms else self.kind]
        if self.folded:
            words = sorted(PLUMBING_WORDS.get(kind, kind) for kind in self.folded)
            lines.append(f"+ per node: {', '.join(words)}")
        return "\\n".join(lines)


@dataclass(frozen=True)
class Arrow:
    before: str
    """The box created first (its URN)."""
    after: str
    """The box that waits for it."""
    critical: bool = False
    queued: bool = False
    """On the critical path without a dependency: it waited for capacity the earlier step freed."""


@dataclass(frozen=True)
class Graph:
    boxes: list[Box]
    arrows: list[Arrow]


def _provider_urn(resource: RecordedResource) -> tuple[str, ...]:
    # An explicit provider is a dependency the SDK does not list: the Kubernetes provider waits for
    # the API server, so every Kubernetes object does (a provider reference is `URN::ID`).
    provider = resource.provider
    return (provider.rsplit("::", 1)[0],) if isinstance(provider, str) and "::" in provider else ()


def waits_for(resource: RecordedResource) -> tuple[str, ...]:
    return (*resource.dependencies, *_provider_urn(resource))


def _node_vms(resources: Sequence[RecordedResource]) -> dict[str, str]:
    """Node name -> its VM's URN: the VM a per-node guard's `vm_id` comes from, or the VM that
    waits for a per-node resource (its rolling-update gate)."""
    vms = {r.urn for r in resources if r.type == VM}
    by_urn = {r.urn: r for r in resources}
    found: dict[str, str] = {}
    for resource in resources:
        node = resource.inputs.get(NODE_KEY)
        sources = [urn for urn in resource.property_dependencies.get("vm_id", []) if urn in vms]
        if isinstance(node, str) and len(sources) == 1:
            found.setdefault(node, sources[0])
    for resource in resources:
        if resource.type != VM:
            continue
        for dependency in resource.dependencies:
            node = by_urn[dependency].inputs.get(NODE_KEY) if dependency in by_urn else None
            if isinstance(node, str):
                found.setdefault(node, resource.urn)
    return found


def build(resources: Sequence[RecordedResource], critical_path: Sequence[str] = (), *, detail: bool = False) -> Graph:
    """The boxes and arrows; `critical_path`: the deployment model's chain of resource URNs."""
    by_urn = {r.urn: r for r in resources if r.type != _STACK}
    node_vms = {} if detail else _node_vms(resources)

    def owner_of(resource: RecordedResource) -> RecordedResource:
        """The nearest of our components holding `resource`, else its top-most ancestor below the stack."""
        current = resource
        # Our custom resources (the gpucluster plugin's kinds) share the prefix: only a component
        # is a box.
        while current.custom or not current.type.startswith(OUR_COMPONENTS):
            parent = by_urn.get(current.parent or "")
            if parent is None:
                break
            current = parent
        return current

    def plumbing_vm(resource: RecordedResource) -> str | None:
        """The VM whose box a per-node resource folds into (None: not folded)."""
        if resource.type == VM or resource.parent in by_urn:
            return None  # inside one of our components already, or the node itself
        node = resource.inputs.get(NODE_KEY)
        return node_vms.get(node) if isinstance(node, str) else None

    box_of: dict[str, str] = {}
    boxes: dict[str, Box] = {}
    folded: dict[str, str] = {}
    for resource in by_urn.values():
        vm = plumbing_vm(resource)
        owner = owner_of(by_urn[vm]) if vm else owner_of(resource)
        box_of[resource.urn] = owner.urn
        box = boxes.setdefault(owner.urn, Box(owner.urn, owner.name, owner.type.split(":")[-1]))
        box.vms += resource.type == VM
        if vm:
            folded[resource.urn] = owner.urn
            box.folded.add(resource.type.split(":")[-1])
    arrows: dict[tuple[str, str], Arrow] = {}
    for resource in by_urn.values():
        if resource.urn in folded:
            continue  # its waits are day-two ordering: --graph-detail draws them
        for dependency in waits_for(resource):
            if dependency not in by_urn or dependency in folded:
                continue
            before, after = box_of[dependency], box_of[resource.urn]
            if before != after:
                arrows[(before, after)] = Arrow(before, after)
    on_path = [urn for urn in critical_path if urn in box_of]
    for urn in on_path:
        boxes[box_of[urn]].critical = True
    for earlier, later in itertools.pairwise(on_path):
        before, after = box_of[earlier], box_of[later]
        if before == after:
            continue
        queued = earlier not in waits_for(by_urn[later])
        known = arrows.get((before, after))
        arrows[(before, after)] = Arrow(before, after, critical=True, queued=queued and known is None)
    return Graph(
        boxes=[boxes[urn] for urn in sorted(boxes)],
        arrows=[arrows[key] for key in sorted(arrows)],
    )


def counts(graph: Graph) -> tuple[int, int]:
    """Boxes and arrows: what a reader has to take in."""
    return len(graph.boxes), len(graph.arrows)


def critical_arrows(graph: Graph) -> Iterable[Arrow]:
    return (arrow for arrow in graph.arrows if arrow.critical)
