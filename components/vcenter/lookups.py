"""Reads by name: one property-collector round per object type, and small `find_*` lookups."""

from __future__ import annotations

from typing import Any

from pyVmomi import vim, vmodl

from components.vcenter.errors import VsphereError


def collect_properties(si: Any, root: Any, vimtype: type, paths: list[str]) -> list[tuple[Any, dict[str, Any]]]:
    """(object, {path: value}) for every object of a type under `root`, in one collector round.

    Unset properties are simply absent. (Reading them one by one through pyVmomi's accessors works
    on vCenter too, but govmomi's simulator drops the connection on an unset one.)
    """
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(root, [vimtype], True)
    try:
        traversal = vmodl.query.PropertyCollector.TraversalSpec(
            name="view", path="view", skip=False, type=vim.view.ContainerView
        )
        spec = vmodl.query.PropertyCollector.FilterSpec(
            objectSet=[vmodl.query.PropertyCollector.ObjectSpec(obj=view, skip=True, selectSet=[traversal])],
            propSet=[vmodl.query.PropertyCollector.PropertySpec(type=vimtype, pathSet=paths)],
        )
        collector = content.propertyCollector
        result = collector.RetrievePropertiesEx([spec], vmodl.query.PropertyCollector.RetrieveOptions())
        found: list[tuple[Any, dict[str, Any]]] = []
        while result is not None:
            for obj in result.objects:
                found.append((obj.obj, {prop.name: prop.val for prop in obj.propSet}))
            if not result.token:
                break
            result = collector.ContinueRetrievePropertiesEx(result.token)
        return found
    finally:
        view.Destroy()


def names_in_view(si: Any, vimtype: type) -> list[tuple[Any, str]]:
    """(object, name) for every object of a type, fetched in one property-collector round."""
    everything = collect_properties(si, si.RetrieveContent().rootFolder, vimtype, ["name"])
    return [(obj, props["name"]) for obj, props in everything if "name" in props]


def _find_by_name(si: Any, vimtype: type, name: str, kind: str) -> Any | None:
    matches = [obj for obj, obj_name in names_in_view(si, vimtype) if obj_name == name]
    if len(matches) > 1:
        ids = ", ".join(sorted(m._moId for m in matches))
        raise VsphereError(
            f"{kind} name {name!r} is ambiguous in vCenter ({ids}); names must be unique",
            object_name=name,
        )
    return matches[0] if matches else None


def find_host_or_none(si: Any, name: str) -> Any | None:
    return _find_by_name(si, vim.HostSystem, name, "host")


def find_host(si: Any, name: str) -> Any:
    """The HostSystem with this vCenter name; VsphereError naming it when absent."""
    host = find_host_or_none(si, name)
    if host is None:
        raise VsphereError(f"ESXi host {name!r} not found in vCenter", object_name=name)
    return host


def find_vm(si: Any, name: str) -> Any | None:
    """The VirtualMachine with this name, None if none (VsphereError if ambiguous)."""
    return _find_by_name(si, vim.VirtualMachine, name, "virtual machine")


def find_vm_by_uuid(si: Any, uuid: str) -> Any | None:
    """The VM whose BIOS UUID (`config.uuid`) is `uuid`: what pulumi-vsphere uses as its VM id."""
    index = si.RetrieveContent().searchIndex
    return index.FindByUuid(datacenter=None, uuid=uuid, vmSearch=True, instanceUuid=False)


def require_vm_by_uuid(si: Any, uuid: str, label: str) -> Any:
    """`find_vm_by_uuid`, failing with the VM's name (`label`) and id when it is gone."""
    vm = find_vm_by_uuid(si, uuid)
    if vm is None:
        raise VsphereError(f"VM {label} (BIOS UUID {uuid}) not found in vCenter", object_name=label)
    return vm
