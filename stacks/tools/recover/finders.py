"""Find, read-only, each pulumi-vsphere resource of the stack in vCenter by the name the program
gave it, and say the id `pulumi import` takes for it.

Import ids, as pulumi-vsphere 4.18.2 documents them (the "Import" section of each resource's
docstring in pulumi_vsphere/, generated from terraform-provider-vsphere's website/docs/r/*.html.markdown):
- VirtualMachine: the VM's inventory path, `/dc-01/vm/foo` (virtual_machine.py);
- DistributedVirtualSwitch: its path, `/dc-01/network/vds-01` (distributed_virtual_switch.py);
- DistributedPortGroup: its path, `/dc-01/network/pg-01` (distributed_port_group.py);
- Folder: its path, `/default-dc/vm/example-vm-folder` (folder.py);
- ComputeClusterVmGroup, ComputeClusterHostGroup, ComputeClusterVmHostRule: a JSON object
  `{"compute_cluster_path": "/dc1/host/cluster1", "name": "..."}` (compute_cluster_vm_group.py,
  compute_cluster_host_group.py, compute_cluster_vm_host_rule.py; "if the group is of a different
  type, an error will be returned", so each is matched by its vim class here too);
- Vnic: `<host moref>_<device>`, `host-123_vmk2` (vnic.py).

Names are scoped as the program places them: a VM under the stack's folder (another stack's VM of
the same name in another folder is not it), a group or rule in the stack's cluster.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pyVmomi import vim

from components.vcenter.lookups import find_host_or_none
from stacks.tools.recover import kinds


def inventory_path(entity: Any) -> str:
    """`/DC0/vm/folder/name`: the names from the root folder's child down (the root is not named;
    its own `parent` is not asked for: the simulator drops the connection on that read)."""
    root = _root_folder(entity)
    names: list[str] = []
    while entity is not None and entity != root:
        names.append(entity.name)
        entity = entity.parent
    return "/" + "/".join(reversed(names))


def _root_folder(entity: Any) -> Any:
    instance = vim.ServiceInstance("ServiceInstance", entity._stub)
    return instance.RetrieveContent().rootFolder


@dataclass
class Scope:
    """What the stack's names are relative to: its datacenter and DRS cluster."""

    si: Any
    datacenter_path: str
    """`/DC0` (with any folders above the datacenter)."""
    cluster: Any | None
    port_group_keys: dict[str, str]
    """Port group name -> its key, filled as port groups are found (a vmknic names its port group by key)."""

    def at(self, relative: str, vimtype: type) -> Any | None:
        found = self.si.RetrieveContent().searchIndex.FindByInventoryPath(f"{self.datacenter_path[1:]}/{relative}")
        return found if isinstance(found, vimtype) else None


def scope_for(si: Any, datacenter: str, cluster: str) -> Scope:
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.Datacenter], True)
    try:
        matches = [dc for dc in view.view if dc.name == datacenter]
    finally:
        view.Destroy()
    if not matches:
        raise LookupError(f"datacenter {datacenter!r} (vcenter.datacenter) not found")
    path = inventory_path(matches[0])
    found = content.searchIndex.FindByInventoryPath(f"{path[1:]}/host/{cluster}")
    return Scope(
        si=si,
        datacenter_path=path,
        cluster=found if isinstance(found, vim.ClusterComputeResource) else None,
        port_group_keys={},
    )


def _cluster_member(scope: Scope, name: str, kind: type, *, rule: bool) -> str | None:
    if scope.cluster is None:
        return None
    config = scope.cluster.configurationEx
    entries = config.rule if rule else config.group
    if not any(e.name == name and isinstance(e, kind) for e in entries or []):
        return None
    return json.dumps({"compute_cluster_path": inventory_path(scope.cluster), "name": name}, separators=(",", ":"))


def _vnic(scope: Scope, inputs: dict[str, Any], host_name: str | None, port_group: str | None) -> str | None:
    if host_name is None or port_group is None or port_group not in scope.port_group_keys:
        return None
    host = find_host_or_none(scope.si, host_name)
    if host is None:
        return None
    # The host's network system's own view of its VMkernel adapters (HostNetworkSystem.networkInfo).
    for nic in host.configManager.networkSystem.networkInfo.vnic or []:
        port = nic.spec.distributedVirtualPort
        if port is not None and port.portgroupKey == scope.port_group_keys[port_group]:
            return f"{host._moId}_{nic.device}"
    return None


def find_id(
    scope: Scope,
    type_token: str,
    inputs: dict[str, Any],
    *,
    host_name: str | None = None,
    port_group: str | None = None,
) -> str | None:
    """The import id of the object a resource of `type_token` with these (program) inputs made;
    None when vCenter has no such object. `host_name`/`port_group`: a vmknic's host and port
    group names (its inputs carry only their ids)."""
    if type_token == kinds.FOLDER:
        folder = scope.at(f"vm/{inputs['path']}", vim.Folder)
        return inventory_path(folder) if folder is not None else None
    if type_token == kinds.VM:
        where = f"vm/{inputs['folder']}/{inputs['name']}" if inputs.get("folder") else f"vm/{inputs['name']}"
        vm = scope.at(where, vim.VirtualMachine)
        return inventory_path(vm) if vm is not None else None
    if type_token == kinds.SWITCH:
        dvs = scope.at(f"network/{inputs['name']}", vim.DistributedVirtualSwitch)
        return inventory_path(dvs) if dvs is not None else None
    if type_token == kinds.PORT_GROUP:
        group = scope.at(f"network/{inputs['name']}", vim.dvs.DistributedVirtualPortgroup)
        if group is None:
            return None
        scope.port_group_keys[inputs["name"]] = group.key
        return inventory_path(group)
    if type_token == kinds.VM_GROUP:
        return _cluster_member(scope, inputs["name"], vim.cluster.VmGroup, rule=False)
    if type_token == kinds.HOST_GROUP:
        return _cluster_member(scope, inputs["name"], vim.cluster.HostGroup, rule=False)
    if type_token == kinds.VM_HOST_RULE:
        return _cluster_member(scope, inputs["name"], vim.cluster.VmHostRuleInfo, rule=True)
    if type_token == kinds.VNIC:
        return _vnic(scope, inputs, host_name, port_group)
    raise KeyError(type_token)


@dataclass(frozen=True)
class TemplateCopy:
    path: str
    dependents: int
    """VMs whose disks hang off it (linked clones): they must go before it can."""


def template_copies(si: Any, scope: Scope, bases: list[str], stack: str) -> list[TemplateCopy]:
    """The stack's template copies in vCenter: beside each base template, named
    `<base>-<stack>-<8 hex>` (components/vsphere/template_copies/plan.py `is_copy_name`; another
    stack's copies carry its name and are not matched)."""
    from components.vsphere.template_copies.chains import dependents
    from components.vsphere.template_copies.plan import is_copy_name

    found: list[TemplateCopy] = []
    for base in bases:
        template = scope.at(f"vm/{base}", vim.VirtualMachine)
        if template is None:
            template = _by_name(si, base)
        if template is None:
            continue
        for child in template.parent.childEntity:
            if isinstance(child, vim.VirtualMachine) and is_copy_name(child.name, base, stack):
                found.append(TemplateCopy(inventory_path(child), len(dependents(si, child))))
    return found


def _by_name(si: Any, name: str) -> Any | None:
    from components.vcenter.lookups import find_vm

    return find_vm(si, name)
