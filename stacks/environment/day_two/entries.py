"""The day-two classes, the upstream rules they rest on, and the entries many keys share.

`day_two` maps every key of the environment to one of these (or its own entry); see its docstring
for what each class means. Pure data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

DayTwoClass = Literal["in-place", "rolls-nodes", "rebuild", "no-effect-on-existing"]

HEADLINES: Mapping[DayTwoClass, str] = {
    "in-place": "takes effect on the next `pulumi up`",
    "rolls-nodes": "rolls the nodes: each is replaced by a new VM, one at a time",
    "rebuild": "cannot be changed on a live cluster: a rebuild",
    "no-effect-on-existing": "no effect on existing nodes or the running cluster",
}


@dataclass(frozen=True)
class DayTwo:
    cls: DayTwoClass
    happens: str
    """What `pulumi up` will and will not do with the change on a live environment."""
    procedure: str
    """The safe way to make the change."""
    source: str = ""
    """The upstream rule this rests on (needed for every refusal and every non-obvious class)."""
    refuse: bool | None = None
    """Refused unless the user states the rebuild; default: exactly the `rebuild` class."""
    refuse_when: Callable[[Any, Any], bool] | None = None
    """Refused only for some changes: called with the values before and after."""
    refuse_in: Callable[[Any], bool] | None = None
    """Refused only in some environments: called with the edited environment (e.g. a version change
    with a single control-plane node)."""

    @property
    def refused_always(self) -> bool:
        return self.refuse if self.refuse is not None else self.cls == "rebuild"

    def refuses(self, before: Any, after: Any, environment: Any = None) -> bool:
        if self.refuse_in is not None:
            return environment is not None and self.refuse_in(environment)
        if self.refuse_when is not None:
            return self.refuse_when(before, after)
        return self.refused_always


# The upstream rules, cited once.
KUBEADM_RECONFIGURE = (
    "kubeadm stores ClusterConfiguration in the kube-system/kubeadm-config ConfigMap at init and joins read it "
    "from there; changing it means editing that ConfigMap and each node's files by hand "
    "(https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-reconfigure/)"
)
CALICO_POOLS = (
    "Calico: changes to the Installation's IP pools after install are not applied "
    "(https://docs.tigera.io/calico/latest/networking/ipam/initial-ippool); moving pods to a new pool is "
    "https://docs.tigera.io/calico/latest/networking/ipam/migrate-pools"
)
FIRST_BOOT = (
    "cloud-init reads its data once per instance (https://cloudinit.readthedocs.io/en/latest/explanation/boot.html); "
    "this stack ignores later changes to it (components/vsphere/node_pool.py, ignore_changes on guestinfo.*)"
)
STATIC_MAC = (
    "a node's NIC MAC derives from its address (components/vsphere/first_boot.py static_mac) and the guest's "
    "network config matches that MAC; terraform-provider-vsphere does not change the MAC of an existing NIC: "
    "NetworkInterfaceSubresource.Update writes mac_address only when use_static_mac changes "
    "(vsphere/internal/virtualdevice/virtual_machine_network_interface_subresource.go, Update), and this stack "
    "always sets use_static_mac=True (components/vsphere/node_pool.py)"
)
CLUSTER_IDENTIFIER = (
    "pulumi-kubernetes replaces its provider only when clusterIdentifier changes, and a replaced provider replaces "
    "every resource it manages (https://www.pulumi.com/registry/packages/kubernetes/api-docs/provider/, "
    "clusterIdentifier); kubeadm keeps clusterName in kubeadm-config"
)
ETCD_PEERS = (
    "etcd: a member's peer URL changes only through the members API, one member at a time "
    "(https://etcd.io/docs/latest/op-guide/runtime-configuration/)"
)
VNIC_UPDATE = (
    "terraform-provider-vsphere vsphere/resource_vsphere_vnic.go: ipv4 and mtu are not ForceNew, Update calls "
    "HostNetworkSystem.UpdateVirtualNic"
)
IMMUTABLE_PLACEMENT = (
    "EKS Anywhere on vSphere treats datacenter, datastore and network as immutable for the same reasons "
    "(https://anywhere.eks.amazonaws.com/docs/clustermgmt/vsphere-vmotion/); the DRS rules' compute_cluster_id is "
    "ForceNew in terraform-provider-vsphere"
)
ROLLOUT = "stacks/wiring/rollout.py: the key is part of each node's generation; docs/environments.md, rolling changes"


def rebuild(happens: str, procedure: str, source: str) -> DayTwo:
    return DayTwo("rebuild", happens, procedure, source)


NOTHING_LIVE = DayTwo(
    "in-place",
    "no resource carries it: it names or checks things (validate, preflight, messages)",
    "edit it and run `pulumi up`; nothing on the cluster changes",
)
ENGINE_SETTINGS = DayTwo(
    "in-place",
    "no resource carries it: the deploy workflow's `pulumi up` settings (`--parallel`, checkpoints) and the "
    "estimate follow it from the next run on",
    "edit it; the next `bash scripts/up.sh STACK` or deploy workflow run uses it",
)
KUBERNETES_OBJECTS = DayTwo(
    "in-place",
    "the Kubernetes objects the stack applies (add-ons, jobs) are updated; no node is touched",
    "`pulumi up`; workloads restart as their controllers roll them (a DaemonSet node by node, a Job replaced)",
)
TIMEOUT = DayTwo(
    "in-place",
    "the resource that waits carries the new bound from the next `pulumi up` on; nothing restarts",
    "edit it and run `pulumi up`",
)
ROLLS = DayTwo(
    "rolls-nodes",
    "each node of the pool is drained and replaced by a new VM, one at a time (a control plane member at a "
    "time, `gpuWorkers.maxUnavailable` workers at a time); `plan --against` lists them as rolled",
    "check the template first (`python -m stacks preflight`), then `pulumi up`; lift `protect` on the VMs first "
    "in production (docs/environments.md, rolling changes)",
    ROLLOUT,
)


def lone_control_plane(environment: Any) -> bool:
    """A bootstrapped cluster with one control-plane node: replacing it starts a new, empty cluster."""
    return bool(environment.kubernetes.mode == "bootstrap" and len(environment.control_plane.nodes) == 1)


ROLLS_CONTROL_PLANE = DayTwo(
    "rolls-nodes",
    ROLLS.happens + ". With a single control-plane node its new VM starts a new, empty cluster (etcd's data goes "
    "with the old VM, and the new node runs `kubeadm init`): refused unless stated",
    "with one control-plane node add two more first (three members roll one at a time, quorum kept), or state "
    "the rebuild with `--accept-rebuild KEY` and redeploy the workloads; otherwise " + ROLLS.procedure,
    ROLLOUT + "; docs/bootstrap.md (a replaced first control-plane node joins the others, or re-runs init alone)",
    refuse_in=lone_control_plane,
)
"""What rolls the control plane (its template, clone mode, hardware version, size)."""
FIRST_BOOT_ONLY = DayTwo(
    "no-effect-on-existing",
    "only nodes created later (added, or replaced by a rolling change) get the new value: existing nodes keep "
    "what they read at their first boot, so the pool is mixed until every node was replaced",
    "change it on the existing nodes by hand (or replace them with a rolling change, e.g. a new template), and "
    "set it here so new nodes match",
    FIRST_BOOT,
)
FABRIC_IN_PLACE = DayTwo(
    "in-place",
    "the switch, port group or host networking is reconfigured in place; RDMA traffic through it can pause "
    "while it is applied; no VM is replaced",
    "run it when no training job is running (`kubectl get mpijobs -A`), then `pulumi up`",
    VNIC_UPDATE,
)
NEW_NODES_ONLY_TEMPLATE_FACT = DayTwo(
    "no-effect-on-existing",
    "describes the template: existing nodes keep what they were cloned from; new or replaced nodes use the "
    "template as it is then (preflight checks the two agree)",
    "run `python -m stacks preflight` before `pulumi up`",
    "components/vsphere/clone_source.py: a linked clone hangs off the template's one snapshot whatever its name",
)
CLUSTER_STORED = {
    "pod": DayTwo(
        "no-effect-on-existing",
        "only first-boot data changes: kubeadm keeps the old podSubnet in kubeadm-config, Calico keeps its IPPool "
        "and every pod its address; later nodes join with the stored value, so the stack file and the cluster "
        "disagree from then on",
        "keep the old value, or migrate: add a Calico IPPool for the new range, disable the old one, restart "
        "every pod, then change podSubnet in kubeadm-config and --cluster-cidr of each kube-controller-manager; "
        "or rebuild the cluster. State it with `--accept-rebuild kubernetes.podCidr`",
        f"{KUBEADM_RECONFIGURE}; {CALICO_POOLS}",
        refuse=True,
    ),
    "service": DayTwo(
        "no-effect-on-existing",
        "only first-boot data changes: the API servers keep --service-cluster-ip-range, every Service keeps its "
        "ClusterIP and every kubelet the cluster DNS address (the range's 10th), while nodes joining later would "
        "be handed the new one",
        "keep the old value; Kubernetes extends a service range only by adding a ServiceCIDR object "
        "(https://kubernetes.io/docs/tasks/network/extend-service-ip-ranges/), not by replacing it: rebuild the "
        "cluster for a new range. State it with `--accept-rebuild kubernetes.serviceCidr`",
        KUBEADM_RECONFIGURE,
        refuse=True,
    ),
    "endpoint": DayTwo(
        "no-effect-on-existing",
        "the stack's kubeconfig and readiness check switch to the new endpoint, but the API servers' certificates "
        "carry only the old name and kubeadm-config, every kubelet.conf and admin.conf keep the old endpoint: the "
        "stack can no longer talk to the cluster (TLS: name not in certificate), and joins fail",
        "put the new name/VIP in front of the API servers first, add it to apiServer.certSANs in kubeadm-config, "
        "re-issue each API server certificate (`kubeadm init phase certs apiserver`), update the kubeconfigs on "
        "every node, then change it here with `--accept-rebuild kubernetes.controlPlaneEndpoint`",
        KUBEADM_RECONFIGURE,
        refuse=True,
    ),
}
NODE_ADDRESS = DayTwo(
    "rebuild",
    "the running VM keeps its MAC and its guest the old address (first-boot data is read once): the update "
    "changes nothing on the VM, so the plan shows the NIC's MAC diff again on every run, while the stack's "
    "checks, first-boot data and (with no `controlPlaneEndpoint`) the cluster's endpoint use an address the "
    "node does not have. On a control-plane node its etcd peer URL and API server advertise address stay the "
    "old address",
    "do not re-address a node: remove it and add one under a new name with the new address (a worker: scale "
    "out, then in; a control-plane member: one at a time with three or more, etcd keeps quorum). State it with "
    "`--accept-rebuild KEY`",
    f"{STATIC_MAC}; {ETCD_PEERS}",
)
CONTROL_PLANE_ONLY_NONE = DayTwo(
    "in-place",
    "validate refuses this key on control-plane nodes (no PVRDMA NIC, not pinned), so no change reaches a cluster",
    "leave it unset",
)
