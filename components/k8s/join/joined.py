"""NodeJoined: waits, once per node VM, until the node has joined the cluster.

What counts as joined: the Node is registered and Ready and, on a control-plane node, kubeadm has
marked it `node-role.kubernetes.io/control-plane` (its last join phase, after the node's etcd
member joined). The first-boot secrets do not wait for it: `GuestinfoScrub`
(components/vsphere/guestinfo_scrub.py) removes them from vCenter once the guest has read them,
whether or not the node ever joins (issue 40 item 6).

Why a resource of its own, and on day one too: the rollout's settle waits only after a VM was
replaced (components/k8s/rollout/rollout.py), and nothing else in the program waits for a new node.
The wait holds one of the gpucluster plugin's worker threads per node, so the program makes it
depend on the API readiness check and the join token (`__main__.py`): nothing a join needs waits
behind it. A new VM (a rollout replacement) has a new id and so gets a new wait, for its own join.
A node that does not join within `timeout_seconds` fails the step naming the node; the next
`pulumi up` waits again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.k8s.api.client import KubeApi, KubeconfigError
from components.k8s.rollout.drain import POLL_SECONDS, Api
from components.k8s.rollout.steps import CONTROL_PLANE_LABEL, NodeState, NotYet, RolloutError, node_state

DEFAULT_JOIN_TIMEOUT_SECONDS = 45 * 60
"""How long a node may take to join (clone, first boot, kubeadm): the rollout's default."""


class NodeNotJoined(Exception):
    """The node did not join in time."""


def why_not_joined(state: NodeState, *, control_plane: bool) -> str:
    """ "" once the node has joined, else what it still lacks."""
    if not state.found:
        return "it has not registered"
    if not state.ready:
        return "it is not Ready"
    if control_plane and CONTROL_PLANE_LABEL not in state.labels:
        return "kubeadm has not marked it a control-plane node: its join has not finished"
    return ""


@dataclass(frozen=True)
class JoinWait:
    timeout_seconds: float = DEFAULT_JOIN_TIMEOUT_SECONDS
    poll_seconds: float = POLL_SECONDS
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def wait_until_joined(api: Api, node: str, *, control_plane: bool, wait: JoinWait = JoinWait()) -> None:
    """Return once `node` has joined; NodeNotJoined after `wait.timeout_seconds`. An API server
    that does not answer (a control-plane member being replaced) is waited out like a node that
    has not joined yet."""
    deadline = wait.clock() + wait.timeout_seconds
    while True:
        try:
            last = why_not_joined(node_state(api, node), control_plane=control_plane)
        except NotYet as error:
            last = f"the API server did not answer ({error})"
        except RolloutError as error:
            last = str(error)
        if not last:
            return
        if wait.clock() >= deadline:
            raise NodeNotJoined(
                f"node {node} did not join within {wait.timeout_seconds / 60:g} minutes ({last}). Look at the node "
                "(journalctl -u gpucluster-bootstrap), then run pulumi up again, which waits again; a VM whose guest "
                "never read its user-data (GuestinfoScrub warned about it) cannot join: replace it "
                "(pulumi up --replace on the VM)"
            )
        wait.sleep(wait.poll_seconds)


_KEYS = ("node_name", "vm_id", "control_plane", "kubeconfig", "timeout_seconds")


class NodeJoinedProvider(handlers.ResourceHandlers):
    """`create` waits for the join; a new VM or node name is a new wait; nothing else does anything."""

    def __init__(self, *, poll_seconds: float = POLL_SECONDS) -> None:
        super().__init__()
        self.poll_seconds = poll_seconds

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        node = str(props["node_name"])
        try:
            api = KubeApi(str(props["kubeconfig"]))
        except KubeconfigError as error:
            raise NodeNotJoined(f"node {node}: cannot ask the cluster whether it joined: {error}") from None
        wait_until_joined(
            api,
            node,
            control_plane=bool(props.get("control_plane")),
            wait=JoinWait(
                timeout_seconds=float(props.get("timeout_seconds") or DEFAULT_JOIN_TIMEOUT_SECONDS),
                poll_seconds=self.poll_seconds,
            ),
        )
        pulumi.log.info(f"node {node}: joined")
        return handlers.CreateResult(id_=f"{node}@{props['vm_id']}", outs={k: props.get(k) for k in _KEYS})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        replaces = [key for key in ("node_name", "vm_id") if olds.get(key) != news.get(key)]
        changed = any(olds.get(key) != news.get(key) for key in _KEYS)
        return handlers.DiffResult(changes=changed, replaces=replaces)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        return handlers.UpdateResult(outs={k: news.get(k) for k in _KEYS})

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        return handlers.ReadResult(id_=id_, outs=props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing to undo: a wait leaves nothing behind."""


@dataclass(frozen=True, kw_only=True)
class NodeJoinedArgs:
    node_name: str
    """The node's Kubernetes name (the guest's hostname)."""
    vm_id: pulumi.Input[str]
    """The node VM's id: a new VM (a replacement) is a new wait."""
    control_plane: bool
    """Whether the node joins as a control-plane member (joined only once kubeadm marked it one)."""
    kubeconfig: pulumi.Input[str]
    """Admin kubeconfig (a secret; encrypted in state). Must not wait for the VMs: the bootstrap's."""
    timeout_seconds: int = DEFAULT_JOIN_TIMEOUT_SECONDS
    """How long `create` waits (default 2,700: 45 minutes; the stack passes
    `kubernetes.rolloutTimeoutMinutes`)."""


class NodeJoined(GpuclusterResource, module="kubernetes", name="NodeJoined"):
    """Created once the node of one VM has joined the cluster (see the module docstring)."""

    node_name: pulumi.Output[str]

    def __init__(self, name: str, args: NodeJoinedArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = {
            "node_name": args.node_name,
            "vm_id": args.vm_id,
            "control_plane": args.control_plane,
            "kubeconfig": pulumi.Output.secret(args.kubeconfig),
            "timeout_seconds": args.timeout_seconds,
        }
        super().__init__(name, inputs, opts)
