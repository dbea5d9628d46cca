"""ControlPlaneMember: a control-plane node leaves the cluster, etcd included, before its VM goes.

One ControlPlaneMember per control-plane node, depending on the node's VM (its id is an input) and
on the API server's readiness, like `NodeDrain` for GPU workers. Pulumi deletes dependents first,
so removing a control-plane node from the stack file, or replacing its VM delete-first, runs this
resource's `delete` before the VM's:

1. drain the node and delete its Node object (`node_drain.drain_node`: cordon, evict honouring
   PodDisruptionBudgets, delete);
2. remove the node's etcd member through ANOTHER member's client endpoint (etcd's JSON gateway,
   `etcd_gateway.py`), after checking that quorum survives it.

Why step 2 matters. Without it the dead member stays in etcd's member list: it counts in the
quorum (3 members with one dead tolerate no further failure), and a new VM with the same name and
address cannot join cleanly. kubeadm's `addMember` (cmd/kubeadm/app/util/etcd/etcd.go) lists the
members first and, when one already has the joining node's peer URL, skips `MemberAdd` ("The peer
URL ... already exists. Skipping etcd member addition"; an `ErrPeerURLExist` from a racing add is
treated the same). The new etcd then starts with an empty data directory and
`--initial-cluster-state=existing`, and etcd gives it the dead member's ID because the peer URLs
match (server/etcdserver/api/membership/cluster.go `ValidateClusterAndAssignIDs`): a member that
lost its data, which raft does not recover from; the leader's commit index for that ID lies beyond
the empty log, raft's `commitTo` panics ("tocommit(N) is out of range [lastIndex(0)]. Was the raft
log corrupted, truncated, or lost?"), the etcd static pod crash-loops and `kubeadm join` times out
waiting for the cluster. Removing the member first makes the join a plain member add (as a
learner where kubeadm's learner mode is on).

Quorum: see `etcd_removal.py` (the removal goes ahead only when the healthy remaining voting
members are a majority; otherwise it waits, then fails; a member already gone is success).

The last member. With no other control-plane node (`other_addresses` empty), or when the member
list holds no other voting member, nothing is removed: etcd cannot remove its last member (its
`IsReadyToRemoveVotingMember` refuses), and there is no other member to ask. The node is drained,
a warning says that the cluster's state goes with this VM and that a new VM of that name starts a
new cluster (`kubeadm init`), and the VM is let go. Refusing instead would make a single-node
control plane impossible to rebuild or destroy; `pulumi preview` already shows the replacement.

Bounded: the drain by `timeout_seconds`, then the etcd removal by another `timeout_seconds` (stack
key `kubernetes.drainTimeoutMinutes`). `create` records; `read` reports its inputs (the guard has
no state of its own); a new node name or VM replaces it (delete first: the old member leaves before
the new VM joins); credentials, addresses and the timeout update in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from components.gpucluster_resource import GpuclusterResource
from components.k8s.api.client import KubeApi
from components.k8s.etcd.gateway import CLIENT_PORT, EtcdGateway, client_url
from components.k8s.etcd.removal import EtcdMemberError, Removal, remove_etcd_member
from components.k8s.rollout.drain import DEFAULT_TIMEOUT_SECONDS, NodeGuardProvider, drain_node

__all__ = ["ControlPlaneMember", "ControlPlaneMemberArgs", "ControlPlaneMemberProvider", "EtcdMemberError"]


def _outputs(props: dict[str, Any]) -> dict[str, Any]:
    return {
        "node_name": str(props["node_name"]),
        "node_address": str(props["node_address"]),
        "vm_id": str(props["vm_id"]),
        "other_addresses": [str(a) for a in props.get("other_addresses") or []],
        "client_port": int(props.get("client_port") or CLIENT_PORT),
        "kubeconfig": props["kubeconfig"],
        "etcd_ca_pem": props["etcd_ca_pem"],
        "etcd_client_cert_pem": props["etcd_client_cert_pem"],
        "etcd_client_key_pem": props["etcd_client_key_pem"],
        "timeout_seconds": float(props["timeout_seconds"]),
    }


_REPLACING = ("node_name", "vm_id")
_UPDATING = (
    "node_address",
    "other_addresses",
    "client_port",
    "kubeconfig",
    "etcd_ca_pem",
    "etcd_client_cert_pem",
    "etcd_client_key_pem",
    "timeout_seconds",
)


class ControlPlaneMemberProvider(NodeGuardProvider):
    """Create records; delete drains and removes the etcd member (see the module docstring)."""

    replacing = _REPLACING
    updating = _UPDATING

    def outputs(self, props: dict[str, Any]) -> dict[str, Any]:
        return _outputs(props)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        node, timeout = str(props.get("node_name") or id_), float(props["timeout_seconds"])
        try:
            drain_node(KubeApi(str(props["kubeconfig"])), node, timeout_seconds=timeout)
        except OSError as error:
            raise EtcdMemberError(
                f"control-plane node {node}: the API server cannot be reached to drain it ({error}); the VM was "
                "not deleted. If the cluster is gone for good, remove this guard from the state with "
                "`pulumi state delete` and run pulumi up again"
            ) from None
        port = int(props.get("client_port") or CLIENT_PORT)
        others = [client_url(address, port) for address in props.get("other_addresses") or []]
        removal = Removal("last-member")
        if others:
            gateway = EtcdGateway(
                str(props["etcd_ca_pem"]), str(props["etcd_client_cert_pem"]), str(props["etcd_client_key_pem"])
            )
            removal = remove_etcd_member(
                gateway,
                node_name=node,
                node_address=str(props["node_address"]),
                other_endpoints=others,
                client_port=port,
                timeout_seconds=timeout,
            )
        _report(node, removal)


def _report(node: str, removal: Removal) -> None:
    if removal.outcome == "removed" and removal.member is not None:
        pulumi.log.info(
            f"control-plane node {node}: drained; etcd member {removal.member.label} removed via {removal.via}"
        )
    elif removal.outcome == "absent":
        pulumi.log.info(f"control-plane node {node}: drained; its etcd member was already gone")
    else:
        pulumi.log.warn(
            f"control-plane node {node}: drained; it holds the cluster's last etcd member, which is not removed. "
            "The cluster's state goes with this VM: a new VM with this name starts a new cluster (kubeadm init)"
        )


@dataclass(frozen=True, kw_only=True)
class ControlPlaneMemberArgs:
    node_name: str
    """The Kubernetes node name, which kubeadm also gives its etcd member."""
    node_address: str
    """The node's management address: kubeadm's advertise address, so its etcd peer URL is
    `https://<address>:2380`."""
    vm_id: pulumi.Input[str]
    """The node's VM: the guard runs before that VM is deleted or replaced."""
    other_addresses: Sequence[str]
    """The management addresses of the other control-plane nodes, whose etcd client endpoints
    (`https://<address>:2379`) remove the member. Empty for a single control-plane node: then the
    member is the last one and is not removed (see the module docstring)."""
    kubeconfig: pulumi.Input[str]
    """Admin kubeconfig (a secret; encrypted in state), for the drain."""
    etcd_ca_pem: pulumi.Input[str]
    """The etcd CA certificate: the members' server certificates are checked against it."""
    etcd_client_cert_pem: pulumi.Input[str]
    """A client certificate signed by the etcd CA (`ClusterBootstrap.etcd_client_certificate_pem`)."""
    etcd_client_key_pem: pulumi.Input[str]
    """Its key (a secret; encrypted in state)."""
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    """How long the drain may wait for evictions, and then how long the etcd removal may wait for
    quorum to allow it. Default 900 (15 minutes) each, as `NodeDrain`. Stack key
    `kubernetes.drainTimeoutMinutes`."""
    client_port: int = CLIENT_PORT
    """etcd's client port. Default 2379 (kubeadm's); only a test has reason to change it."""

    def __post_init__(self) -> None:
        if self.timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be positive, got {self.timeout_seconds}")
        if self.node_address in self.other_addresses:
            raise ValueError(f"other_addresses must not hold the node's own address {self.node_address}")


class ControlPlaneMember(GpuclusterResource, module="kubernetes", name="ControlPlaneMember"):
    """Drains a control-plane node and removes its etcd member before its VM goes; pass the API
    readiness as `depends_on`."""

    node_name: pulumi.Output[str]

    def __init__(self, name: str, args: ControlPlaneMemberArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            name,
            {
                "node_name": args.node_name,
                "node_address": args.node_address,
                "vm_id": args.vm_id,
                "other_addresses": list(args.other_addresses),
                "client_port": args.client_port,
                "kubeconfig": pulumi.Output.secret(args.kubeconfig),
                "etcd_ca_pem": args.etcd_ca_pem,
                "etcd_client_cert_pem": pulumi.Output.secret(args.etcd_client_cert_pem),
                "etcd_client_key_pem": pulumi.Output.secret(args.etcd_client_key_pem),
                "timeout_seconds": args.timeout_seconds,
            },
            opts,
        )
