"""The vCenter role the stack's account needs: every privilege, the object it is checked on, and
the feature that needs it. One table (`ROLE`), which docs/deploy.md shows and preflight checks
against the account's effective privileges (`AuthorizationManager.HasPrivilegeOnEntities`, read
by `components.vcenter.privileges`).

Privilege IDs and where vCenter checks them: vSphere Security, "Defined Privileges" (e.g.
Distributed Switch privileges: DVSwitch.Create on data centers or network folders, DVSwitch.HostOp
and DVSwitch.Modify on the switch); the vSphere Web Services API's "Required Privileges" of each
method (HostServiceSystem.RestartService and HostFirewallSystem.EnableRuleset:
Host.Config.NetService; HostGraphicsManager.RefreshGraphicsManager: Host.Config.Settings). A
privilege on an object that does not exist yet (the stack's folder, its switch, its VMs) is
checked where they inherit it from: the datacenter (permissions propagate down the inventory).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from components.vcenter.inventory_model import Inventory
from stacks.environment.model import Environment
from stacks.environment.template_sites import replica_sites
from stacks.tools.preflight.checks.report import Finding

USER_KEY = "vsphere:user"

DATACENTER = "datacenter"
CLUSTER = "compute cluster"
DATASTORE = "datastore"
HOSTS = "each GPU host"
TEMPLATE = "template"
"""`vcenter.template` and `vcenter.gpuTemplate`: both are cloned."""
TEMPLATE_FOLDER = "GPU template's folder"

VIM_KIND = {
    DATACENTER: "Datacenter",
    CLUSTER: "ClusterComputeResource",
    DATASTORE: "Datastore",
    HOSTS: "HostSystem",
    TEMPLATE: "VirtualMachine",
    TEMPLATE_FOLDER: "VirtualMachine.parent",
}
"""Each object kind as `components.vcenter.privileges.missing_privileges` resolves it."""

VMS = "VMs (clone, configure, power, delete)"
SWITCH = "PVRDMA distributed switch and its hosts"
HOST_SETTINGS = "host settings (PVRDMA vmknic, firewall, graphics)"
DRS_RULES = "DRS placement rules"
COPIES = "template copies (vcenter.templateReplicas)"


@dataclass(frozen=True)
class Need:
    privilege: str
    on: str
    """The object kind it is checked on (one of the constants above)."""
    feature: str
    applies: Callable[[Environment], bool] = lambda env: True


def _copies(env: Environment) -> bool:
    return bool(replica_sites(env))


def _drs(env: Environment) -> bool:
    return env.gpu_workers.placement in ("vm-host-rules", "anti-affinity")


def _graphics(env: Environment) -> bool:
    return env.host_graphics.manage


ROLE: tuple[Need, ...] = (
    # The VMs: pulumi-vsphere's VirtualMachine clones the templates into the stack's folder.
    Need("Folder.Create", DATACENTER, VMS),
    Need("VirtualMachine.Inventory.CreateFromExisting", DATACENTER, VMS),
    Need("VirtualMachine.Inventory.Create", DATACENTER, VMS),
    Need("VirtualMachine.Inventory.Delete", DATACENTER, VMS),
    Need("VirtualMachine.Config.AddNewDisk", DATACENTER, VMS),
    Need("VirtualMachine.Config.AddRemoveDevice", DATACENTER, VMS),
    Need("VirtualMachine.Config.AdvancedConfig", DATACENTER, VMS),
    Need("VirtualMachine.Config.CPUCount", DATACENTER, VMS),
    Need("VirtualMachine.Config.Memory", DATACENTER, VMS),
    Need("VirtualMachine.Config.EditDevice", DATACENTER, VMS),
    Need("VirtualMachine.Config.Resource", DATACENTER, VMS),
    Need("VirtualMachine.Config.Settings", DATACENTER, VMS),
    Need("VirtualMachine.Interact.PowerOn", DATACENTER, VMS),
    Need("VirtualMachine.Interact.PowerOff", DATACENTER, VMS),
    Need("Network.Assign", DATACENTER, VMS),
    Need("VirtualMachine.Provisioning.Clone", TEMPLATE, VMS),
    Need("VirtualMachine.Provisioning.DeployTemplate", TEMPLATE, VMS),
    Need("Datastore.AllocateSpace", DATASTORE, VMS),
    Need("Resource.AssignVMToPool", CLUSTER, VMS),
    # The PVRDMA switch (pulumi-vsphere) and each host's membership (DvsHostMember).
    Need("DVSwitch.Create", DATACENTER, SWITCH),
    Need("DVSwitch.Modify", DATACENTER, SWITCH),
    Need("DVSwitch.HostOp", DATACENTER, SWITCH),
    Need("DVSwitch.Delete", DATACENTER, SWITCH),
    Need("DVPortgroup.Create", DATACENTER, SWITCH),
    Need("DVPortgroup.Modify", DATACENTER, SWITCH),
    Need("DVPortgroup.Delete", DATACENTER, SWITCH),
    # Each host: the PVRDMA vmknic, Net.PVRDMAVmknic, the pvrdma firewall ruleset, graphics.
    Need("Host.Config.Network", HOSTS, HOST_SETTINGS),
    Need("Host.Config.AdvancedConfig", HOSTS, HOST_SETTINGS),
    Need("Host.Config.NetService", HOSTS, HOST_SETTINGS),
    Need("Host.Config.Settings", HOSTS, HOST_SETTINGS, _graphics),
    # Placement rules in the cluster.
    Need("Host.Inventory.EditCluster", CLUSTER, DRS_RULES, _drs),
    # Template copies: cloned into the template's folder, snapshotted, marked as template (and back
    # to a VM to repair a lost snapshot), renamed `-retired`, removed.
    Need("VirtualMachine.Provisioning.Clone", TEMPLATE, COPIES, _copies),
    Need("VirtualMachine.Inventory.CreateFromExisting", TEMPLATE_FOLDER, COPIES, _copies),
    Need("VirtualMachine.State.CreateSnapshot", TEMPLATE_FOLDER, COPIES, _copies),
    Need("VirtualMachine.Provisioning.MarkAsTemplate", TEMPLATE_FOLDER, COPIES, _copies),
    Need("VirtualMachine.Provisioning.MarkAsVM", TEMPLATE_FOLDER, COPIES, _copies),
    Need("VirtualMachine.Config.Rename", TEMPLATE_FOLDER, COPIES, _copies),
    Need("VirtualMachine.Inventory.Delete", TEMPLATE_FOLDER, COPIES, _copies),
    Need("Datastore.AllocateSpace", DATASTORE, COPIES, _copies),
    Need("Resource.AssignVMToPool", CLUSTER, COPIES, _copies),
)


def targets(env: Environment) -> dict[tuple[str, str], dict[str, list[str]]]:
    """(object kind, name) -> privilege -> the features that need it, for this stack."""
    vc = env.vcenter
    template = vc.gpu_template or vc.template
    names = {
        DATACENTER: [vc.datacenter],
        CLUSTER: [vc.compute_cluster],
        DATASTORE: sorted({vc.datastore, *(site.datastore for site in replica_sites(env))}),
        HOSTS: sorted({node.host for node in env.gpu_workers.nodes if node.host} | {h.name for h in env.hosts}),
        TEMPLATE: sorted({template, vc.template}),
        TEMPLATE_FOLDER: [template],
    }
    wanted: dict[tuple[str, str], dict[str, list[str]]] = {}
    for need in ROLE:
        if not need.applies(env):
            continue
        for name in names[need.on]:
            features = wanted.setdefault((need.on, name), {}).setdefault(need.privilege, [])
            if need.feature not in features:
                features.append(need.feature)
    return wanted


def check_privileges(env: Environment, inv: Inventory, user: str | None = None) -> list[Finding]:
    """One BLOCKER per object where the account lacks privileges, naming each and its feature."""
    if inv.missing_privileges is None:
        return (
            [Finding("WARN", USER_KEY, f"privileges not checked: {inv.privileges_note}")] if inv.privileges_note else []
        )
    wanted = targets(env)
    account = f"account {user!r}" if user else "the account"
    findings = []
    for (kind, name), missing in sorted(inv.missing_privileges.items()):
        if not missing:
            continue
        features = wanted.get((kind, name), {})
        lines = "; ".join(f"{p} ({', '.join(features.get(p, []))})" for p in sorted(missing))
        message = f"{account} lacks on the {kind} {name!r}: {lines}; grant the role of docs/deploy.md (vCenter account)"
        findings.append(Finding("BLOCKER", USER_KEY, message))
    if not findings:
        count = sum(len(p) for p in wanted.values())
        message = f"{account} holds the {count} privileges the stack needs on {len(wanted)} objects"
        findings.append(Finding("OK", USER_KEY, message))
    return findings


def role_table() -> list[str]:
    """`ROLE` as the Markdown table docs/deploy.md shows (a test keeps the two equal)."""
    rows: dict[tuple[str, str], list[str]] = {}
    for need in ROLE:
        features = rows.setdefault((need.privilege, need.on), [])
        if need.feature not in features:
            features.append(need.feature)
    lines = ["| Privilege | Checked on | Needed for |", "|---|---|---|"]
    lines += [f"| `{privilege}` | {on} | {'; '.join(features)} |" for (privilege, on), features in rows.items()]
    return lines
