"""vGPU placement at power-on (vcsim/vgpu_capacity.go): a GPU runs vGPUs of one profile at a
time, up to the profile's count per GPU (NVIDIA vGPU User Guide, "Valid Virtual GPU
Configurations on a Single GPU"; T4 16 GB: 16c x1, 8c x2, 4c x4). The harness hosts have one T4."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
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
)

pytestmark = pytest.mark.vcsim


@pytest.fixture
def make_vgpu_vm(find: Callable[[Any, str], Any], extended: Any) -> Iterator[Callable[[str], Any]]:
    """make_vgpu_vm(profile) -> a powered-off clone with that vGPU, on the template's host,
    whose GPU runs in Shared Direct; all destroyed and the host put back to shared after."""
    source = find(vim.VirtualMachine, TEMPLATE_VM)
    host = source.runtime.host
    set_active_graphics(host, "sharedDirect")
    made: list[Any] = []

    def make(profile: str) -> Any:
        vm = clone(source, unique("vgpu-cap"))
        made.append(vm)
        reconfigure(vm, deviceChange=[vgpu_device_spec(profile)])
        reserve_all_memory(vm)
        assert vm.runtime.host == host
        return vm

    yield make
    for vm in made:
        with contextlib.suppress(Exception):
            destroy(vm)
    set_active_graphics(host, "shared")


def test_a_different_profile_does_not_fit_on_a_gpu_running_another(make_vgpu_vm: Callable[[str], Any]) -> None:
    first = make_vgpu_vm("grid_t4-4c")
    other = make_vgpu_vm("grid_t4-8c")
    power_on(first)

    with pytest.raises(VsphereError) as refused:
        power_on(other)

    assert isinstance(refused.value.fault, vim.fault.InsufficientGraphicsResourcesFault)
    assert "runs grid_t4-4c" in str(refused.value)
    assert other.runtime.powerState == "poweredOff"


def test_a_profile_fits_up_to_its_count_per_gpu(make_vgpu_vm: Callable[[str], Any]) -> None:
    vms = [make_vgpu_vm("grid_t4-8c") for _ in range(3)]
    power_on(vms[0])
    power_on(vms[1])  # T4-8C: two per T4

    with pytest.raises(VsphereError, match=r"already runs 2 of the 2 grid_t4-8c vGPUs") as refused:
        power_on(vms[2])
    assert isinstance(refused.value.fault, vim.fault.InsufficientGraphicsResourcesFault)

    # Room again once one of them is off.
    vms[0].PowerOffVM_Task()
    with contextlib.suppress(Exception):
        destroy(vms[0])
    power_on(vms[2])
    assert vms[2].runtime.powerState == "poweredOn"
