"""The harness refuses what vCenter refuses where our GPU VM code depends on it (vcsim/vm.go).

Each rule here failed to hold on the stock govmomi 0.24 simulator, which accepted duplicate VM
names, reset a clone's hardware version, downgraded hardware, hot-added vGPUs, and powered on
vGPU VMs without reserved memory or 64-bit MMIO.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.tasks import wait_for_task
from tests.components.vsphere.conftest import TEMPLATE_VM
from tests.components.vsphere.graphics_helpers import set_active_graphics
from tests.components.vsphere.vm_helpers import (
    clone,
    destroy,
    power_on,
    reconfigure,
    reserve_all_memory,
    unique,
    vgpu_device_spec,
    wait_for_tools,
)

pytestmark = pytest.mark.vcsim


@pytest.fixture
def source(find: Callable[[Any, str], Any], extended: Any) -> Any:
    return find(vim.VirtualMachine, TEMPLATE_VM)


@pytest.fixture
def made() -> Iterator[list[Any]]:
    vms: list[Any] = []
    yield vms
    for vm in vms:
        with contextlib.suppress(Exception):
            destroy(vm)


def _clone(source: Any, made: list[Any]) -> Any:
    vm = clone(source, unique("rules"))
    made.append(vm)
    # A vGPU VM powers on only where the GPU runs Shared Direct (vcsim/graphics_power.go): set it
    # here rather than rely on what another test left the host in.
    set_active_graphics(vm.runtime.host, "sharedDirect")
    return vm


def test_a_second_vm_with_the_same_name_in_a_folder_is_refused(source: Any, made: list[Any]) -> None:
    first = _clone(source, made)
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=False)

    with pytest.raises(VsphereError, match=rf"DuplicateName: The name '{first.name}' already exists"):
        wait_for_task(source.CloneVM_Task(folder=source.parent, name=first.name, spec=spec))


def test_a_clone_keeps_the_sources_hardware_version_firmware_and_extra_config(source: Any, made: list[Any]) -> None:
    template = _clone(source, made)
    wait_for_task(template.UpgradeVM_Task(version="vmx-21"))
    option = vim.option.OptionValue(key="pciPassthru.use64bitMMIO", value="TRUE")
    reconfigure(template, firmware="efi", extraConfig=[option])

    copy = _clone(template, made)

    assert copy.config.version == "vmx-21"
    assert copy.config.firmware == "efi"
    assert {o.key: o.value for o in copy.config.extraConfig}["pciPassthru.use64bitMMIO"] == "TRUE"


def test_hardware_is_never_downgraded(source: Any, made: list[Any]) -> None:
    vm = _clone(source, made)
    wait_for_task(vm.UpgradeVM_Task(version="vmx-21"))

    with pytest.raises(VsphereError, match=r"AlreadyUpgraded: .*vmx-21.*cannot be changed to vmx-19"):
        wait_for_task(vm.UpgradeVM_Task(version="vmx-19"))
    assert vm.config.version == "vmx-21"


def test_hardware_is_upgraded_only_while_off(source: Any, made: list[Any]) -> None:
    vm = _clone(source, made)
    power_on(vm)

    with pytest.raises(VsphereError, match="InvalidPowerState"):
        wait_for_task(vm.UpgradeVM_Task(version="vmx-21"))


def test_a_vgpu_is_not_hot_added(source: Any, made: list[Any]) -> None:
    vm = _clone(source, made)
    power_on(vm)

    with pytest.raises(VsphereError, match=r"InvalidPowerState: PCI devices .* only .* while it is powered off"):
        reconfigure(vm, deviceChange=[vgpu_device_spec("grid_t4-16c")])


def test_a_vgpu_vm_does_not_power_on_without_all_memory_reserved(source: Any, made: list[Any]) -> None:
    vm = _clone(source, made)
    reconfigure(vm, deviceChange=[vgpu_device_spec("grid_t4-16c")])

    with pytest.raises(VsphereError, match=r"memory reservation \(sched.mem.min\) should be equal to memsize"):
        power_on(vm)
    reserve_all_memory(vm)
    power_on(vm)
    assert vm.runtime.powerState == "poweredOn"


A100_MMIO = {"pciPassthru.use64bitMMIO": "TRUE", "pciPassthru.64bitMMIOSizeGB": "128"}


@pytest.mark.parametrize(
    ("firmware", "extra", "problem"),
    [
        ("bios", A100_MMIO, 'firmware is "bios", not efi'),
        ("efi", {}, "pciPassthru.use64bitMMIO is not TRUE"),
        ("efi", {**A100_MMIO, "pciPassthru.64bitMMIOSizeGB": "32"}, 'pciPassthru.64bitMMIOSizeGB is "32", below 64'),
    ],
)
def test_a_large_bar_vgpu_vm_needs_efi_and_64bit_mmio(
    source: Any, made: list[Any], firmware: str, extra: dict[str, str], problem: str
) -> None:
    vm = _clone(source, made)
    options = [vim.option.OptionValue(key=k, value=v) for k, v in extra.items()]
    reconfigure(vm, firmware=firmware, extraConfig=options, deviceChange=[vgpu_device_spec("grid_a100-40c")])
    reserve_all_memory(vm)

    with pytest.raises(VsphereError, match=r"vGPU grid_a100-40c needs 64-bit MMIO \(VMware KB 2142307\)") as info:
        power_on(vm)
    assert problem in str(info.value)
    assert vm.runtime.powerState == "poweredOff"


def test_a_large_bar_vgpu_vm_with_efi_and_64bit_mmio_powers_on(source: Any, made: list[Any]) -> None:
    vm = _clone(source, made)
    options = [vim.option.OptionValue(key=k, value=v) for k, v in A100_MMIO.items()]
    reconfigure(vm, firmware="efi", extraConfig=options, deviceChange=[vgpu_device_spec("grid_a100-40c")])
    reserve_all_memory(vm)

    power_on(vm)

    assert vm.runtime.powerState == "poweredOn"


def test_tools_answer_only_a_while_after_power_on_and_a_shutdown_needs_them(source: Any, made: list[Any]) -> None:
    vm = _clone(source, made)
    power_on(vm)
    assert vm.guest.toolsRunningStatus == "guestToolsNotRunning"

    with pytest.raises(vim.fault.ToolsUnavailable):
        vm.ShutdownGuest()

    wait_for_tools(vm)
    vm.ShutdownGuest()
    assert vm.runtime.powerState == "poweredOff"
    assert vm.guest.toolsRunningStatus == "guestToolsNotRunning"
