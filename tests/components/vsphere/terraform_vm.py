"""What pulumi-vsphere's `VirtualMachine` does in vCenter, replayed with pyvmomi for the harness.

The Pulumi CLI (and so the pulumi-vsphere plugin) is not available here, so a deployment test
replays the vim calls of terraform-provider-vsphere (the provider pulumi-vsphere wraps), in its
order, with the inputs the real program registered (vsphere/resource_vsphere_virtual_machine.go,
resourceVSphereVirtualMachineCreateClone -> resourceVSphereVirtualMachinePostDeployChanges, and
resourceVSphereVirtualMachineDelete):

create: CloneVM_Task (powerOn false) -> ReconfigVM_Task (CPU, memory, reservation, extraConfig,
        firmware; its read ignores vmiop devices, so it neither adds nor removes a vGPU) ->
        SetHardwareVersion (refuses a downgrade: "cannot downgrade virtual machine hardware
        version"; else UpgradeVM_Task when the version differs) -> PowerOnVM_Task, always.
delete: GracefulPowerOff (guest shutdown when Tools run, else a forced power-off) -> Destroy_Task.

Left out, and why it does not matter for what the tests check: NICs (the harness's networks are
not the stack's port groups), disks and linked clones (the simulator copies disks; no vGPU or
power step depends on them).
"""

from __future__ import annotations

import time
from typing import Any

from pyVmomi import vim

from components.vcenter.lookups import find_vm_by_uuid
from components.vcenter.tasks import wait_for_task


class TerraformError(Exception):
    """An error terraform-provider-vsphere raises itself, before vCenter sees anything."""


def _folder(si: Any, datacenter: Any, path: str) -> Any:
    """The VM folder at `path` under the datacenter's VM folder, made as vsphere.Folder would."""
    folder = datacenter.vmFolder
    for part in [p for p in path.split("/") if p]:
        child = next((c for c in folder.childEntity if isinstance(c, vim.Folder) and c.name == part), None)
        folder = child if child is not None else folder.CreateFolder(part)
    return folder


def _hardware(version: str) -> int:
    return int(version.removeprefix("vmx-"))


def create(si: Any, inputs: dict[str, Any], *, datacenter: Any, pool: Any) -> Any:
    """Create the VM from a recorded `VirtualMachine`'s inputs; returns it (powered on)."""
    source = find_vm_by_uuid(si, inputs["clone"]["templateUuid"])
    assert source is not None, f"template {inputs['clone']['templateUuid']} not in the simulator"
    host = None
    if inputs.get("hostSystemId"):
        host = vim.HostSystem(inputs["hostSystemId"], si._stub)
    location = vim.vm.RelocateSpec(pool=pool, host=host)
    spec = vim.vm.CloneSpec(location=location, powerOn=False, template=False)
    vm = wait_for_task(source.CloneVM_Task(folder=_folder(si, datacenter, inputs["folder"]), name=inputs["name"], spec=spec))

    memory = int(inputs["memory"])
    config = vim.vm.ConfigSpec(
        numCPUs=int(inputs["numCpus"]),
        memoryMB=memory,
        firmware=inputs.get("firmware"),
        extraConfig=[vim.option.OptionValue(key=k, value=v) for k, v in (inputs.get("extraConfig") or {}).items()],
    )
    if inputs.get("memoryReservation") is not None:
        config.memoryAllocation = vim.ResourceAllocationInfo(reservation=int(inputs["memoryReservation"]))
    if inputs.get("memoryReservationLockedToMax") is not None:
        config.memoryReservationLockedToMax = bool(inputs["memoryReservationLockedToMax"])
    wait_for_task(vm.ReconfigVM_Task(spec=config))

    target = int(inputs.get("hardwareVersion") or 0)
    current = _hardware(vm.config.version)
    if target and target != current:
        if target < current:  # ValidateHardwareVersion
            raise TerraformError(
                f"cannot downgrade virtual machine hardware version, current: {current}, target: {target}"
            )
        wait_for_task(vm.UpgradeVM_Task(version=f"vmx-{target}"))

    wait_for_task(vm.PowerOnVM_Task())
    return vm


def delete(vm: Any, *, shutdown_wait_s: float = 5.0) -> None:
    """GracefulPowerOff(force=true), then Destroy_Task."""
    if vm.runtime.powerState == "poweredOn":
        if vm.guest.toolsRunningStatus == "guestToolsRunning":
            vm.ShutdownGuest()
            deadline = time.monotonic() + shutdown_wait_s
            while vm.runtime.powerState != "poweredOff" and time.monotonic() < deadline:
                time.sleep(0.1)
        if vm.runtime.powerState != "poweredOff":
            wait_for_task(vm.PowerOffVM_Task())
    wait_for_task(vm.Destroy_Task())
