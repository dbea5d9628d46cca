"""Rolling node changes: immutable nodes, replaced one at a time, the next only once the last is back.

A change to what a node is made of (its template, linked clone, vCPUs, memory, hardware version or
vGPU profiles: its *generation*, `stacks.wiring.rollout`) replaces the node's VM. Left to itself,
Pulumi would replace every VM of the change at once (independent steps run in parallel), and would
give each new VM the first-boot data of the old one: the VM ignores changes to its `guestinfo`
keys (cloud-init blanks them after reading), and the engine fills ignored properties from the old
state, replacements included (pulumi/pulumi pkg/resource/deploy/step_generator.go,
`processIgnoreChanges`), so the new VM would join with an expired token. Three small resources
per node make it a rolling replacement with fresh first-boot data:

- `RolloutGeneration` records the node's generation. Its `update` (only on a change, or to reset)
  says whether the node still has the change to finish: `pending` until the node carries the
  generation's label, which its settle sets. It makes one API read and changes nothing.
- `RolloutGate` is *replaced*, delete-first, when the generation changes, and the VM's
  `datastore_path` (a ForceNew property, always "") carries its id: the engine deletes a delete-first resource's dependents
  before it (and the VM's own guards before the VM: `NodeDrain` or `ControlPlaneMember` drain the
  node, remove it and its etcd member), then re-creates them with the program's *new* inputs
  (`recreating` in step_generator.go skips the ignored-property fill). The gate depends on its
  generation and, while the node's change is pending, on the previous node's settle: a dependency
  given as an Output (`depends_on` accepts one), resolved once `pending` is known, so the gate is
  registered, and the VM replaced, only after the node before it is back.
- `RolloutSettle` depends on the VM (and its vGPU device) and on the previous node's settle. On a
  change it waits until the node is back: Ready on one boot for a minute, on a control-plane node
  marked by kubeadm as one (its etcd member joined), on a GPU worker advertising its GPUs; then it
  labels the node `gpucluster.io/generation`.

Day one: the generation and gate are created (no call), nothing is pending, so no VM waits for
another: the dependency on the previous settle exists only while a change is pending. A static
one would serialise day one (each VM waiting for the previous node's clone and boot). Nothing polls
for another node either: the gpucluster plugin serves every resource of ours from one process with
a bounded worker pool (four threads with the dynamic providers this was designed under), so
waiting gates would starve the settle they wait for. One settle per chain waits at a time.

Failure and re-runs: a settle that times out fails its update; the engine then registers nothing
that depends on it, so no node after it is touched. The next `pulumi up` finds that node still
pending (no label), so the next node's gate again waits for its settle, which waits again (at once
if the node is back by then); a node already replaced is not replaced again (its gate is at the new
generation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.k8s.api.client import KubeApi, KubeconfigError
from components.k8s.rollout.steps import (
    DEFAULT_WAIT_SECONDS,
    NotYet,
    RolloutError,
    Timing,
    change_pending,
    node_state,
    runs_version,
    settle,
)
from components.k8s.upgrade.upgrade import ClusterUpgrade, ClusterUpgradeArgs, EtcdAccess


class RolloutGenerationProvider(handlers.ResourceHandlers):
    """Records a node's generation; `pending` while the node has a change to finish."""

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        # Day one, scale out: a new node has nothing to finish, and no VM waits for another.
        return handlers.CreateResult(id_=str(props["node_name"]), outs={**props, "pending": False})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        if olds.get("node_name") != news.get("node_name"):
            return handlers.DiffResult(changes=True, replaces=["node_name"])
        # A pending node is looked at again every run until its change is finished (labelled).
        changed = any(olds.get(key) != news.get(key) for key in ("generation", "kubernetes_version"))
        return handlers.DiffResult(changes=changed or bool(olds.get("pending")))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        try:
            api = KubeApi(str(news["kubeconfig"]))
        except KubeconfigError:
            pending = True  # the safe side: the next node waits for this one
        else:
            pending = change_pending(
                api, str(news["node_name"]), str(news["generation"]), str(news.get("kubernetes_version") or "")
            )
        return handlers.UpdateResult(outs={**news, "pending": pending})

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        return handlers.ReadResult(id_=id_, outs=props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None


class RolloutGateProvider(handlers.ResourceHandlers):
    """Replaced, delete-first, on a new generation; its replacement replaces the node's VM."""

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        return handlers.CreateResult(id_=f"{props['node_name']}@{props['generation']}", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        replaces = [key for key in ("node_name", "generation") if olds.get(key) != news.get(key)]
        # A new Kubernetes version rolls the node too (a new VM joins at it).
        if "kubernetes_version" in olds:
            if olds["kubernetes_version"] != news.get("kubernetes_version"):
                replaces.append("kubernetes_version")
        elif news.get("kubernetes_version") and _kubelet_behind(news):
            # A gate recorded before gates carried the version does not know the old one: the node's
            # kubelet does. At the stack's version, the gate takes it in place (that first run must not
            # roll every node); behind it (the version edited in that same run), the node rolls, or
            # the stack would say the new version while the cluster stays at the old one.
            replaces.append("kubernetes_version")
        # `previous_node` is for people and `plan --against`; changing it changes nothing here.
        changed = bool(replaces) or any(
            olds.get(key) != news.get(key) for key in ("previous_node", "kubernetes_version")
        )
        return handlers.DiffResult(changes=changed, replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        return handlers.UpdateResult(outs=news)

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        return handlers.ReadResult(id_=id_, outs=props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing of its own: the node's guards, deleted before it, drained and removed the node."""


def _kubelet_behind(news: dict[str, Any]) -> bool:
    """Whether the gate's node runs a kubelet other than the stack's version (a node the cluster
    does not know any more counts as behind: rolling it is what brings it back). Refuses, naming
    the node, when the cluster cannot say: neither guess is safe (one rolls every node, the other
    leaves the cluster at the old version while the stack says the new one)."""
    node, version = str(news["node_name"]), str(news["kubernetes_version"])
    refusal = (
        f"node {node}: its rollout gate predates kubernetes.version in the gates, and whether the node runs "
        f"{version} (to roll it or not) cannot be read from the cluster"
    )
    try:
        state = node_state(KubeApi(str(news.get("kubeconfig") or "")), node)
    except KubeconfigError as error:
        raise RolloutError(f"{refusal}: {error}") from None
    except (NotYet, RolloutError) as error:
        raise RolloutError(f"{refusal} ({error}); run the preview or `pulumi up` again once the API answers") from None
    return not state.found or not runs_version(state, version)


_SETTLE_KEYS = (
    "node_name",
    "generation",
    "kubernetes_version",
    "vm_id",
    "control_plane",
    "gpus",
    "kubeconfig",
    "timeout_seconds",
)


class RolloutSettleProvider(handlers.ResourceHandlers):
    """`update` after a new VM waits until the node is back, then uncordons and labels it."""

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        return handlers.CreateResult(id_=str(props["node_name"]), outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        changed = [key for key in _SETTLE_KEYS if olds.get(key) != news.get(key)]
        # An update, not a replacement, when the VM is replaced: `create` would not wait.
        return handlers.DiffResult(changes=bool(changed), replaces=[k for k in changed if k == "node_name"])

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        if news["vm_id"] == olds.get("vm_id") and news["generation"] == olds.get("generation"):
            return handlers.UpdateResult(outs=news)
        node = str(news["node_name"])
        try:
            settle(
                KubeApi(str(news["kubeconfig"])),
                node,
                str(news["generation"]),
                control_plane=bool(news["control_plane"]),
                gpus=int(news.get("gpus") or 0),
                kubelet_version=str(news.get("kubernetes_version") or ""),
                timing=Timing(timeout_seconds=float(news["timeout_seconds"])),
            )
        except OSError as error:  # the final PATCH (the waits ride out an unreachable API)
            raise RolloutError(f"node {node}: labelling it failed ({error}); run pulumi up again") from None
        pulumi.log.info(f"node {node}: back, Ready at generation {news['generation']}")
        return handlers.UpdateResult(outs=news)

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        return handlers.ReadResult(id_=id_, outs=props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing to undo: the label goes with the Node."""


@dataclass(frozen=True, kw_only=True)
class RolloutStep:
    """One node's place in the rollout order."""

    node_name: str
    """The Kubernetes node name (the guest's hostname)."""
    generation: pulumi.Input[str]
    """What the node is made of, as a short hash; a change replaces the node."""
    previous_node: str = ""
    """The node before it in the order ("" for the first): while this node's change is pending,
    its gate waits for that node's settle."""
    control_plane: bool = False
    """Whether the node must come back as a control-plane member (kubeadm's role label)."""
    gpus: int = 0
    """How many `nvidia.com/gpu` the node must advertise to count as back (its vGPUs)."""
    kubernetes_version: str = ""
    """The version its kubelet must run (`kubernetes.version`, e.g. "1.35.0"): a change rolls the
    node like a new generation, and the node counts as back only with a kubelet at it. Default ""
    (not checked)."""


@dataclass(frozen=True, kw_only=True)
class RolloutArgs:
    kubeconfig: pulumi.Input[str]
    """Admin kubeconfig (a secret; encrypted in state). Must not depend on the node VMs (the gate
    comes before them): the bootstrap's kubeconfig Output, or the stack's existing one."""
    timeout_seconds: int = DEFAULT_WAIT_SECONDS
    """How long one node may take to come back (default 2,700: 45 minutes, a full clone and first
    boot with package installs). Stack key `kubernetes.rolloutTimeoutMinutes`."""
    kubernetes_version: str = ""
    """The cluster's version (`kubernetes.version`). When set, its change is an upgrade: the two
    `ClusterUpgrade` steps (`components.k8s.upgrade.upgrade`) go before every gate and after the last
    control-plane node. Default "": no upgrade steps (the steps' own versions are still checked)."""
    etcd: EtcdAccess | None = None
    """The etcd members the version step checks before a change onto a new etcd line
    (`components.k8s.upgrade.upgrade`). Default None: such a change is refused."""
    etcd_image_tag: str | None = None
    """The etcd tag the version step keeps in the stored ClusterConfiguration (`etcd.local.imageTag`);
    a change of it rolls the control plane through the nodes' generation (the caller folds it in).
    Default None: left as stored."""
    api_server: Mapping[str, Any] | None = None
    """The API server's `extraArgs`/`extraVolumes` the version step keeps in the stored
    ClusterConfiguration before any node is replaced (`components.k8s.upgrade.api_server_settings`).
    Default None: the stored copy is left as it is."""

    def __post_init__(self) -> None:
        if self.timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be positive, got {self.timeout_seconds}")


class RolloutGeneration(GpuclusterResource, module="kubernetes", name="RolloutGeneration"):
    """A node's generation, and whether its change is still pending (see the module docstring)."""

    pending: pulumi.Output[bool]

    def __init__(
        self, name: str, step: RolloutStep, args: RolloutArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        inputs = {
            "node_name": step.node_name,
            "generation": step.generation,
            "kubernetes_version": step.kubernetes_version,
            "kubeconfig": pulumi.Output.secret(args.kubeconfig),
            "pending": None,
        }
        super().__init__(name, inputs, opts)


class RolloutGate(GpuclusterResource, module="kubernetes", name="RolloutGate"):
    """Replaced on a new generation, replacing the node's VM with it (see the module docstring)."""

    def __init__(
        self, name: str, step: RolloutStep, args: RolloutArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        inputs = {
            "node_name": step.node_name,
            "generation": step.generation,
            "kubernetes_version": step.kubernetes_version,
            "previous_node": step.previous_node,
            # Read only by `diff`, for a gate recorded before gates carried the version.
            "kubeconfig": pulumi.Output.secret(args.kubeconfig),
        }
        super().__init__(name, inputs, opts)


class RolloutSettle(GpuclusterResource, module="kubernetes", name="RolloutSettle"):
    """After a node's replacement: wait until it is back, label it (see the module docstring)."""

    def __init__(
        self,
        name: str,
        step: RolloutStep,
        args: RolloutArgs,
        *,
        vm_id: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        inputs = {
            "node_name": step.node_name,
            "generation": step.generation,
            "kubernetes_version": step.kubernetes_version,
            "vm_id": vm_id,
            "control_plane": step.control_plane,
            "gpus": step.gpus,
            "kubeconfig": pulumi.Output.secret(args.kubeconfig),
            "timeout_seconds": args.timeout_seconds,
        }
        super().__init__(name, inputs, opts)


def while_pending(
    generation: RolloutGeneration, previous_settle: Callable[[], pulumi.Resource | None]
) -> pulumi.Output[list[pulumi.Resource]]:
    """A gate's `depends_on`: its generation and, while its node's change is pending, the previous
    node's settle. `previous_settle` is called once `pending` is known, after the program built
    every resource, so settles can be built after the gates that wait for them."""

    def resolve(pending: bool | None) -> list[pulumi.Resource]:
        previous = previous_settle() if pending else None
        return [previous] if previous is not None else []

    return generation.pending.apply(resolve)


def _flat(groups: list[list[pulumi.Resource]]) -> list[pulumi.Resource]:
    return [resource for group in groups for resource in group]


class NodeRollout:
    """Builds the rollout's resources in the order the program can: every node's generation and
    gate before the VMs (whose `datastore_path` carries the gate's id), each settle after its VM."""

    def __init__(self, steps: Sequence[RolloutStep], args: RolloutArgs) -> None:
        self._steps = {step.node_name: step for step in steps}
        self._args = args
        self._settles: dict[str, RolloutSettle] = {}
        self._generations: dict[str, RolloutGeneration] = {}
        self.gates: dict[str, RolloutGate] = {}
        """Per node name, its gate: the VM's `datastore_path` must depend on its id."""
        # Before any node is replaced: the stored ClusterConfiguration at the new version, which a
        # new control-plane node's kubeadm join reads. A static dependency: on day one and on a change
        # without a new version it does nothing, at once.
        self.cluster_version = (
            ClusterUpgrade(
                "cluster-version",
                ClusterUpgradeArgs(
                    step="cluster-configuration",
                    version=args.kubernetes_version,
                    kubeconfig=args.kubeconfig,
                    etcd=args.etcd,
                    etcd_image_tag=args.etcd_image_tag,
                    api_server=args.api_server,
                ),
            )
            if args.kubernetes_version
            else None
        )
        before_any: list[pulumi.Resource] = [self.cluster_version] if self.cluster_version else []
        for step in steps:
            generation = RolloutGeneration(f"rollout-gen-{step.node_name}", step, args)
            self._generations[step.node_name] = generation
            self.gates[step.node_name] = RolloutGate(
                f"rollout-gate-{step.node_name}",
                step,
                args,
                opts=pulumi.ResourceOptions(
                    depends_on=while_pending(generation, self._settle_of(step.previous_node)).apply(
                        lambda waits: [*before_any, *waits]
                    ),
                    # Its provider asks for it too; the option says it where the engine reads it first.
                    delete_before_replace=True,
                ),
            )

    def _settle_of(self, node_name: str) -> Callable[[], pulumi.Resource | None]:
        return lambda: self._settles.get(node_name)

    def settle_all(self, nodes: Mapping[str, tuple[pulumi.Input[str], Sequence[pulumi.Resource]]]) -> None:
        """Each node's settle, in rollout order: after what changes the node (`nodes`: per node name,
        its VM id and its VM and vGPU device) and, while the previous node's change is pending,
        after that node's settle: a node added in the middle of a rollout (nothing pending of its
        own) then still makes the next node wait, through its settle, for the node before it."""
        for name, step in self._steps.items():
            vm_id, changers = nodes[name]
            previous = self._generations.get(step.previous_node)
            after_previous: pulumi.Input[list[pulumi.Resource]] = (
                while_pending(previous, self._settle_of(step.previous_node)) if previous else []
            )
            self._settles[name] = RolloutSettle(
                f"rollout-settle-{name}",
                step,
                self._args,
                vm_id=vm_id,
                opts=pulumi.ResourceOptions(depends_on=pulumi.Output.all(changers, after_previous).apply(_flat)),
            )
        last_control_plane = [name for name, step in self._steps.items() if step.control_plane][-1:]
        if self._args.kubernetes_version and last_control_plane:
            # Once the last control-plane node is back at the new version: kube-proxy and CoreDNS.
            ClusterUpgrade(
                "cluster-addons-version",
                ClusterUpgradeArgs(
                    step="addons", version=self._args.kubernetes_version, kubeconfig=self._args.kubeconfig
                ),
                opts=pulumi.ResourceOptions(depends_on=[self._settles[last_control_plane[0]]]),
            )
