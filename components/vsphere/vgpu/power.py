"""Powering a vGPU VM down and up again: gracefully, and resumable after a lost connection.

A guest is shut down only through VMware Tools, never powered off hard (see `vgpu`), and a VM we
shut down carries a mark in its extraConfig until it is back on, so a re-run after vCenter went
away knows to power it on.
"""

from __future__ import annotations

import time
from typing import Any

from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.faults import fault_text
from components.vcenter.tasks import wait_for_task


def tools_running(vm: Any) -> bool:
    return vm.guest is not None and vm.guest.toolsRunningStatus == "guestToolsRunning"


def shut_down_guest(vm: Any, *, name: str, timeout: float, poll: float = 0.5) -> None:
    """Shut the guest down through VMware Tools and wait until the VM is off.

    Waits up to `timeout` for Tools to answer (a booting guest gets there), then up to `timeout`
    for the shutdown. Never a hard power-off: a guest cut mid-boot loses its once-per-instance
    cloud-init run; one that will not shut down is an error, and the VM stays on.
    """
    if vm.runtime.powerState == "poweredOff":
        return
    deadline = time.monotonic() + timeout
    while not tools_running(vm):
        if time.monotonic() >= deadline:
            raise VsphereError(
                f"VM {name}: VMware Tools did not answer within {timeout:g}s, so the guest cannot be "
                "shut down cleanly; it is left running (no hard power-off). Check the guest, or shut it "
                "down yourself and run `pulumi up` again",
                object_name=name,
            )
        time.sleep(poll)
    try:
        vm.ShutdownGuest()
    except vim.fault.InvalidPowerState:
        pass  # it went off in the meantime
    except vim.fault.ToolsUnavailable as exc:
        raise VsphereError(
            f"VM {name}: guest shutdown refused: {fault_text(exc)}", object_name=name, fault=exc
        ) from exc
    deadline = time.monotonic() + timeout
    while vm.runtime.powerState != "poweredOff":
        if time.monotonic() >= deadline:
            raise VsphereError(
                f"VM {name}: the guest did not shut down within {timeout:g}s; it is left as it is (no hard power-off)",
                object_name=name,
            )
        time.sleep(poll)


def power_on(vm: Any, *, name: str) -> None:
    if vm.runtime.powerState != "poweredOn":
        wait_for_task(vm.PowerOnVM_Task(), object_name=name, what="power on")


#: VM extraConfig key set while this provider holds a running VM powered off. If vCenter is lost
#: mid-way, the next run (a retry or a later `pulumi up`) sees it and powers the VM back on.
POWER_ON_MARKER = "pulumi.vgpuAttachment.powerOnAfter"


def power_on_pending(vm: Any) -> bool:
    # The last entry wins: vCenter keeps one entry per key, govmomi 0.24's simulator appends.
    value = ""
    for option in vm.config.extraConfig or []:
        if option.key == POWER_ON_MARKER:
            value = str(option.value or "")
    return value.lower() == "true"


def set_power_on_marker(vm: Any, pending: bool, *, name: str) -> None:
    # An empty value removes an extraConfig key.
    option = vim.option.OptionValue(key=POWER_ON_MARKER, value="true" if pending else "")
    wait_for_task(
        vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(extraConfig=[option])),
        object_name=name,
        what="mark power state" if pending else "clear power state mark",
    )


def finish_power_on(vm: Any, *, name: str) -> None:
    power_on(vm, name=name)
    set_power_on_marker(vm, False, name=name)
