"""Arranging template copies in the vCenter simulator for the TemplateReplica and retired-copies
tests (plain pyvmomi)."""

from __future__ import annotations

from typing import Any

from pyVmomi import vim

from components.vcenter.tasks import wait_for_task
from tests.components.vsphere.conftest import _find


def copy_props(si: Any, source: Any, host_name: str, *, linked: bool = True) -> dict[str, Any]:
    host = _find(si, vim.HostSystem, host_name)
    pool = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    return {
        "name": f"{source.name}-{host_name}",
        "source_uuid": source.config.uuid,
        "source_name": source.name,
        "host_id": host._moId,
        "host_name": host_name,
        "datastore_id": source.datastore[0]._moId,
        "resource_pool_id": pool._moId,
        "linked": linked,
        "snapshot_name": "base",
    }


def vm_by_uuid(si: Any, uuid: str) -> Any:
    return si.RetrieveContent().searchIndex.FindByUuid(datacenter=None, uuid=uuid, vmSearch=True, instanceUuid=False)


def hang_off(si: Any, vm: Any, parent_file: str) -> None:
    """Give `vm`'s disk the chain a linked clone has on vCenter: its own file in its own folder, the
    source's disk as parent. govmomi's simulator drops the parent on clone, and its clones share
    one disk object with their source, so a later clone's file name shows on earlier VMs too."""
    disk = next(d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk))
    folder = vm.config.files.vmPathName.rsplit("/", 1)[0]
    disk.backing.fileName = f"{folder}/{vm.name}.vmdk"
    disk.backing.parent = vim.vm.device.VirtualDisk.FlatVer2BackingInfo(fileName=parent_file, diskMode="persistent")
    change = vim.vm.device.VirtualDeviceSpec(operation="edit", device=disk)
    template = bool(vm.config.template)
    if template:  # a template takes no reconfigure: a VM for the edit, a template again after
        vm.MarkAsVirtualMachine(pool=_find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool)
    wait_for_task(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[change])))
    if template:
        vm.MarkAsTemplate()


def disk_file(vm: Any) -> str:
    """The VM's own disk file as vCenter names it: in its folder, after its name."""
    return f"{vm.config.files.vmPathName.rsplit('/', 1)[0]}/{vm.name}.vmdk"
