"""Arranging and reading VMs in the vCenter simulator for the GPU VM tests (plain pyvmomi)."""

from __future__ import annotations

import time
from typing import Any

from pyVmomi import vim

from components.vcenter.tasks import wait_for_task

_EVENT_KINDS = {
    "VmPoweredOffEvent": "off",
    "VmPoweredOnEvent": "on",
    "VmReconfiguredEvent": "reconfig",
    "VmGuestShutdownEvent": "guest-shutdown",
}


def vgpus(vm: Any) -> list[str]:
    return [
        d.backing.vgpu
        for d in vm.config.hardware.device
        if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
        and isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo)
    ]


def events(si: Any, vm: Any) -> list[str]:
    """Power, guest-shutdown and reconfigure events of a VM, oldest first, from vCenter's log."""
    spec = vim.event.EventFilterSpec(
        entity=vim.event.EventFilterSpec.ByEntity(entity=vm, recursion="self"), maxCount=1000
    )
    found = si.RetrieveContent().eventManager.QueryEvents(spec)
    kinds = [(e.key, type(e).__name__.split(".")[-1]) for e in found]
    return [_EVENT_KINDS[kind] for _, kind in sorted(kinds) if kind in _EVENT_KINDS]


def timed_events(si: Any, vm: Any) -> list[tuple[int, str]]:
    """(event key, kind): keys order events across VMs too (one counter per vCenter)."""
    spec = vim.event.EventFilterSpec(
        entity=vim.event.EventFilterSpec.ByEntity(entity=vm, recursion="self"), maxCount=1000
    )
    found = si.RetrieveContent().eventManager.QueryEvents(spec)
    pairs = [(e.key, type(e).__name__.split(".")[-1]) for e in found]
    return [(key, _EVENT_KINDS[kind]) for key, kind in sorted(pairs) if kind in _EVENT_KINDS]


def off_windows(timeline: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """(off key, on key) of each time a VM was powered off, from `timed_events`: the windows of
    several VMs overlap when two were down at once."""
    windows, start = [], None
    for key, kind in timeline:
        if kind == "off":
            start = key
        elif kind == "on" and start is not None:
            windows.append((start, key))
            start = None
    return windows


def vgpu_device_spec(profile: str, key: int = -100) -> Any:
    return vim.vm.device.VirtualDeviceSpec(
        operation=vim.vm.device.VirtualDeviceSpec.Operation.add,
        device=vim.vm.device.VirtualPCIPassthrough(
            key=key, backing=vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=profile)
        ),
    )


def clone(source: Any, name: str, host: Any = None) -> Any:
    """A powered-off clone in the source's folder, on `host` (default: the source's)."""
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(host=host), powerOn=False)
    return wait_for_task(source.CloneVM_Task(folder=source.parent, name=name, spec=spec))


def reconfigure(vm: Any, **spec: Any) -> None:
    wait_for_task(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(**spec)))


def reserve_all_memory(vm: Any) -> None:
    """What pulumi-vsphere's post-clone reconfigure does for `memory_reservation_locked_to_max`."""
    reconfigure(
        vm,
        memoryAllocation=vim.ResourceAllocationInfo(reservation=vm.config.hardware.memoryMB),
        memoryReservationLockedToMax=True,
    )


def power_on(vm: Any) -> None:
    wait_for_task(vm.PowerOnVM_Task())


def destroy(vm: Any) -> None:
    if vm.runtime.powerState == "poweredOn":
        wait_for_task(vm.PowerOffVM_Task())
    wait_for_task(vm.Destroy_Task())


def wait_for_tools(vm: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while vm.guest.toolsRunningStatus != "guestToolsRunning":
        assert time.monotonic() < deadline, f"VMware Tools of {vm.name} never came up in the harness"
        time.sleep(0.1)


def unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns() % 10_000_000}"
