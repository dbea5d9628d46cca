"""What recovery does with each kind of resource the program registers.

Every custom resource type the program registers falls in exactly one class; a type in none is
`UNCLASSIFIED`, and `recover` refuses to call its answer complete (tests/components/vsphere/test_vcsim_recover.py
fails on it), so a new resource type cannot be silently forgotten.

- IMPORTED: pulumi-vsphere resources, found in vCenter by name (`finders`), written to the import file.
- ADOPTED: the project's own resources, served by the gpucluster provider plugin
  (`gpucluster:<module>:<Name>`; `pulumi-python:dynamic/<module>:<Name>` in states from before it).
  `pulumi import --file` gives a provider's Read only the id, no inputs and no state
  (provider/server.py `read`: "an import: the engine passes only inputs", and the CLI's import has
  none), and their reads find the object from recorded inputs (DvsHostMember's `host_name` and
  `switch_uuid`, PvrdmaHostSettings' `host_name`, ...). So they are not imported: `pulumi up`
  creates them again, and what that does is in `ADOPTED` per kind, read from each `create`
  (components/).
- STATE_ONLY: resources that exist only in Pulumi's state (random, tls): nothing in vCenter to find.
- IN_CLUSTER: Kubernetes objects and providers.
"""

from __future__ import annotations

from dataclasses import dataclass

VM = "vsphere:index/virtualMachine:VirtualMachine"
SWITCH = "vsphere:index/distributedVirtualSwitch:DistributedVirtualSwitch"
PORT_GROUP = "vsphere:index/distributedPortGroup:DistributedPortGroup"
FOLDER = "vsphere:index/folder:Folder"
VM_GROUP = "vsphere:index/computeClusterVmGroup:ComputeClusterVmGroup"
HOST_GROUP = "vsphere:index/computeClusterHostGroup:ComputeClusterHostGroup"
VM_HOST_RULE = "vsphere:index/computeClusterVmHostRule:ComputeClusterVmHostRule"
VNIC = "vsphere:index/vnic:Vnic"

IMPORTED = (VM, SWITCH, PORT_GROUP, FOLDER, VM_GROUP, HOST_GROUP, VM_HOST_RULE, VNIC)

ADOPTED: dict[str, str] = {
    # components/vsphere/dvs_host_member.py `_apply`, and the plugin's batched path
    # (components/vsphere/dvs_member_batch.py `_member_spec`): read the host's membership first;
    # add it only when absent, edit only when its uplinks differ.
    "DvsHostMember": "looks first: a host already on the switch with the same uplinks is left as it is",
    # components/vsphere/pvrdma_host.py `_apply`: sets the advanced option and ruleset to the
    # wanted values (no-ops when already set). Its `previous_*` outputs (what `pulumi destroy`
    # restores) are read from the host at create: after an interruption they are the values the
    # interrupted run had already set.
    "PvrdmaHostSettings": (
        "looks first: values already set are left; but what `pulumi destroy` restores is read now, so a host the "
        "interrupted run had already configured keeps its PVRDMA settings after a destroy"
    ),
    # components/vsphere/host_graphics/resource.py `_apply`: the host's earlier mode is kept on the
    # host itself (`read_previous`/`write_previous`), so a second create finds the original.
    "HostGraphicsMode": "looks first: the host's original graphics mode is read back from the host, not lost",
    # components/vsphere/vgpu/attachment.py `create`: verifies the VM's vGPU devices, no power cycle.
    "VgpuAttachment": "verifies the VM's vGPU devices (no power cycle on create)",
    # components/vsphere/guestinfo_scrub.py `create` -> `_scrub`: removes keys still there.
    "GuestinfoScrub": "removes first-boot keys still present; none left is a no-op",
    # components/vsphere/pki_delivery.py `create`: done when the node already answered; else it
    # answers the one request of the VM, the one an earlier run's envelope names (a sealed
    # envelope, public values only in vCenter), and fails "keys exposed: rotate" on any other.
    "InitPkiDelivery": (
        "looks first: a node that confirmed its keys is done; otherwise the VM's one request is answered "
        "(a second one fails: keys exposed, rotate)"
    ),
    # components/vsphere/template_copies/replica.py `create` -> `_check_adoptable`: a finished copy
    # of its name is REFUSED (it could be another resource's live copy). See `TEMPLATE_COPY_NOTE`.
    "TemplateReplica": "NOT idempotent over a finished copy: see the template copies listed below",
    # components/k8s/*: waits and checks against the cluster, or records only.
    "NodeJoined": "waits until the node is Ready in the cluster (reads the cluster)",
    "ApiServerReady": "waits until the API server answers (reads the cluster)",
    "ControlPlaneMember": "records only (a guard that acts on delete)",
    "RolloutGeneration": "records only",
    "RolloutGate": "records only",
    "RolloutSettle": "records only",
    "NodeDrain": "records only (drains on delete)",
    "ClusterUpgrade": "checks the cluster's version first; runs its step only where the cluster is not at it",
    "JoinTokenRotation": "issues a fresh join-token timestamp (the old token expires on its own)",
}

TEMPLATE_COPY_NOTE = (
    "a finished template copy blocks `pulumi up`: TemplateReplica's create refuses a template of its name "
    "(components/vsphere/template_copies/replica.py `_check_adoptable`), and a dynamic resource cannot be "
    "imported. If no VM clones from it (`dependents` below is 0), delete it in vCenter before `pulumi up`; "
    "otherwise the VMs hanging off it were made by the interrupted run too: delete those VMs first"
)

STATE_ONLY_PACKAGES = ("random", "tls")
STATE_ONLY_NOTE = (
    "exists only in Pulumi's state: `pulumi up` makes new values. VMs the interrupted run booted took the old "
    "ones (cluster CA, join token) at first boot; if the control plane VM is listed above, delete the imported "
    "VMs' entries or run `pulumi up --replace` on them so they boot with the new ones"
)
PROVIDER_NOTE = "an explicit provider: its configuration lives in the state only; `pulumi up` registers it again"
IN_CLUSTER_NOTE = (
    "a Kubernetes object or provider: lives in the cluster, not in vCenter. pulumi-kubernetes 4.34 (pinned) "
    "creates client-side: an object the interrupted run already made fails with AlreadyExists (v4.29.0 "
    "changelog, pulumi-kubernetes#2926) unless its provider sets upsertExistingObjects (only the join token's "
    "does, components/k8s/join/token.py); `pulumi import` it with its `<namespace>/<name>` id, or delete it, "
    "before `pulumi up`"
)


@dataclass(frozen=True)
class Kind:
    name: str
    """IMPORTED, ADOPTED, STATE_ONLY, IN_CLUSTER or UNCLASSIFIED."""
    note: str = ""


def provider_served_name(type_token: str) -> str | None:
    """`DvsHostMember` from `pulumi-python:dynamic/vsphere:DvsHostMember` or
    `gpucluster:vsphere:DvsHostMember`; None for any other type."""
    if type_token.startswith(("pulumi-python:dynamic/", "gpucluster:")):
        return type_token.rsplit(":", 1)[-1]
    return None


def classify(type_token: str) -> Kind:
    """The class of a CUSTOM resource type (components are structure, not classified)."""
    if type_token in IMPORTED:
        return Kind("IMPORTED")
    served = provider_served_name(type_token)
    if served is not None:
        return Kind("ADOPTED", ADOPTED[served]) if served in ADOPTED else Kind("UNCLASSIFIED")
    package = type_token.split(":", 1)[0]
    if package in STATE_ONLY_PACKAGES:
        return Kind("STATE_ONLY", STATE_ONLY_NOTE)
    if package == "kubernetes":
        return Kind("IN_CLUSTER", IN_CLUSTER_NOTE)
    if type_token in ("pulumi:providers:kubernetes", "pulumi:providers:gpucluster"):
        return Kind("STATE_ONLY", PROVIDER_NOTE)
    return Kind("UNCLASSIFIED")
