"""A template copy's disk chains, and the VMs that hang off it: plain pyVmomi, no Pulumi (the
provider's delete and the `retired-copies` command both ask).

On vCenter a linked clone's `VirtualDisk.backing.parent` chain names its source's snapshot disk
(createNewChildDiskBacking, what pulumi-vsphere's `linked_clone` asks for), a file in the source's
own folder; a linked copy's chain goes on into its template's base disk.
"""

from __future__ import annotations

from typing import Any

from pyVmomi import vim, vmodl

from components.vcenter.lookups import collect_properties

MARK = "gpucluster.templateReplica"
"""extraConfig key on a copy: its own name, set by its clone; what `create` may adopt."""
OWNER = "gpucluster.templateReplicaOwner"
"""extraConfig key on a copy, set by its clone: `<stack>|<source uuid>|<source snapshot>`, what a
re-run checks before it adopts a finished copy whose create lost its answer (replica.py)."""
RETIRED = "-retired"
"""Suffix of a copy left in vCenter because linked clones still hang off it (replica.py's doc)."""

READ = ("snapshot", "config.template", "config.uuid", "name", "config.extraConfig")


def read_vm(si: Any, vm: Any, paths: tuple[str, ...] = READ) -> dict[str, Any]:
    """`snapshot`, `config.template`, `config.uuid`, `name` of one VM in one collector call: an unset
    property (`snapshot` of a VM without one) is absent here, where pyVmomi's accessor makes
    govmomi's simulator drop the connection (components/vcenter/lookups.py, collect_properties)."""
    collector = si.RetrieveContent().propertyCollector
    spec = vmodl.query.PropertyCollector.FilterSpec(
        objectSet=[vmodl.query.PropertyCollector.ObjectSpec(obj=vm, skip=False)],
        propSet=[
            vmodl.query.PropertyCollector.PropertySpec(
                type=vim.VirtualMachine,
                pathSet=list(paths),
            )
        ],
    )
    found = collector.RetrieveContents([spec])
    return {prop.name: prop.val for obj in found for prop in obj.propSet}


def _backing_files(device: Any) -> list[str]:
    """A disk's file and every parent's down its chain (a linked clone's `backing.parent`...)."""
    files, backing = [], getattr(device, "backing", None)
    while backing is not None:
        if getattr(backing, "fileName", None):
            files.append(backing.fileName)
        backing = getattr(backing, "parent", None)
    return files


def _disks(devices: Any) -> list[Any]:
    return [device for device in devices or [] if isinstance(device, vim.vm.device.VirtualDisk)]


def own_disk_files(si: Any, vm: Any) -> set[str]:
    """The copy's own disk files: those in its own folder (its delta disks and its snapshot's).

    A linked copy's chain goes on into the template's base disk, which every other linked copy of
    the template and every worker cloned from the template share: those files are not the copy's,
    and a chain through them only is no linked clone of the copy. Without a folder path (never on
    vCenter), each disk's own top file."""
    own = read_vm(si, vm, ("config.files.vmPathName", "config.hardware.device"))
    path = own.get("config.files.vmPathName", "")
    folder = path.rsplit("/", 1)[0] + "/" if "/" in path else None
    disks = _disks(own.get("config.hardware.device"))
    if folder is None:
        return {chain[0] for disk in disks if (chain := _backing_files(disk))}
    return {name for disk in disks for name in _backing_files(disk) if name.startswith(folder)}


def dependents(si: Any, vm: Any) -> list[str]:
    """Names of the VMs whose disk chain runs through one of the copy's own disk files: its linked
    clones.

    On vCenter a linked clone's `VirtualDisk.backing.parent` chain names its source's snapshot disk
    (createNewChildDiskBacking), a file in the source's folder. Only the copy's own files count
    (`own_disk_files`): another copy of the same template shares the template's base disk with it
    and hangs off the template, not off this copy."""
    files = own_disk_files(si, vm)
    found = []
    everyone = collect_properties(
        si, si.RetrieveContent().rootFolder, vim.VirtualMachine, ["name", "config.hardware.device"]
    )
    for obj, props in everyone:
        if obj._moId == vm._moId:
            continue
        chain = [name for disk in _disks(props.get("config.hardware.device")) for name in _backing_files(disk)[1:]]
        if any(name in files for name in chain):
            found.append(props.get("name", obj._moId))
    return sorted(found)
