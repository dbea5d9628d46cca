"""The GPU template's step after Packer (components/vsphere/vgpu/template_step.py) against the
vCenter simulator harness: a build VM with the one vGPU Packer's vsphere-clone adds becomes a
template with every vGPU of the workers' profiles, their MMIO, EFI, a snapshot after the devices.

Issue 54 item 1: six hosts with two L40S each, one worker per host: the worker needs both vGPUs in
its template, which Packer alone cannot give it (one `vgpu_profile`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vsphere.gpu_template import gpu_template_findings
from components.vsphere.vgpu.devices import template_facts
from components.vsphere.vgpu.template_step import finish_gpu_template, main
from tests.components.vsphere.conftest import TEMPLATE_VM
from tests.components.vsphere.vm_helpers import clone, destroy, power_on, reconfigure, unique, vgpu_device_spec, vgpus

pytestmark = pytest.mark.vcsim


@pytest.fixture
def packer_left(extended: Any, find: Callable[[Any, str], Any]) -> Iterator[Callable[..., Any]]:
    """What templates/packer/gpu leaves with several profiles: a powered-off VM with the first vGPU."""
    made: list[Any] = []

    def make(first_profile: str, firmware: str = "efi") -> Any:
        vm = clone(find(vim.VirtualMachine, TEMPLATE_VM), unique("gpu-build"))
        made.append(vm)
        # EFI: the base template's firmware (templates/packer/base), kept by the clone.
        reconfigure(vm, firmware=firmware, deviceChange=[vgpu_device_spec(first_profile)])
        return vm

    yield make
    for vm in made:
        destroy(vm)  # a template too: Destroy_Task takes either


def _snapshot_names(vm: Any) -> list[str]:
    def walk(trees: Any) -> list[str]:
        return [name for tree in trees or [] for name in [tree.name, *walk(tree.childSnapshotList)]]

    return walk(vm.snapshot.rootSnapshotList)


def test_two_l40s_vgpus_their_mmio_and_efi_then_snapshot_and_template(packer_left: Callable[..., Any], si: Any) -> None:
    profiles = ["nvidia_l40s-48c", "nvidia_l40s-48c"]
    vm = packer_left(profiles[0])

    done = finish_gpu_template(si, vm.name, profiles, snapshot="base")

    assert vgpus(vm) == profiles
    assert done.added == ("nvidia_l40s-48c",)
    assert vm.config.memoryReservationLockedToMax is True
    assert vm.config.firmware == "efi"
    facts = template_facts(vm)
    assert facts.extra_config["pciPassthru.use64bitMMIO"] == "TRUE"
    assert facts.extra_config["pciPassthru.64bitMMIOSizeGB"] == "256"  # 2 x 48 GB, twice, next power of two
    assert _snapshot_names(vm) == ["base"]
    assert vm.config.template is True
    # What preflight then says of it: the template the stack asks for.
    findings = gpu_template_findings(facts, profiles=profiles, hardware_version=99)
    assert [f.level for f in findings] == ["OK"], findings


def test_small_bar_profiles_get_no_mmio_and_a_template_is_refused(packer_left: Callable[..., Any], si: Any) -> None:
    vm = packer_left("grid_t4-16c")

    done = finish_gpu_template(si, vm.name, ["grid_t4-16c", "grid_t4-16c"], snapshot=None)

    assert vgpus(vm) == ["grid_t4-16c", "grid_t4-16c"]
    assert done.extra_config == ()
    assert "pciPassthru.64bitMMIOSizeGB" not in template_facts(vm).extra_config
    with pytest.raises(VsphereError, match="already a template: vCenter reconfigures no template"):
        finish_gpu_template(si, vm.name, ["grid_t4-16c", "grid_t4-16c"], snapshot=None)


def test_a_running_build_vm_is_refused_unchanged(packer_left: Callable[..., Any], si: Any) -> None:
    vm = packer_left("grid_t4-16c")
    reconfigure(vm, memoryAllocation=vim.ResourceAllocationInfo(reservation=vm.config.hardware.memoryMB))
    from tests.components.vsphere.graphics_helpers import set_active_graphics

    set_active_graphics(vm.runtime.host, "sharedDirect")
    power_on(vm)

    with pytest.raises(VsphereError, match="poweredOn: vCenter adds a vGPU only while the VM is off"):
        finish_gpu_template(si, vm.name, ["grid_t4-16c", "grid_t4-16c"], snapshot="base")

    assert vgpus(vm) == ["grid_t4-16c"]
    assert vm.config.template is False


def test_the_command_names_what_is_missing(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("VSPHERE_SERVER", "VSPHERE_USER", "VSPHERE_PASSWORD"):
        monkeypatch.delenv(variable, raising=False)

    assert main(["--vm", "x", "--profile", "grid_t4-16c"]) == 1

    assert "VSPHERE_USER" in capsys.readouterr().err


def test_a_bios_build_vm_for_large_bar_vgpus_is_refused_unchanged(packer_left: Callable[..., Any], si: Any) -> None:
    vm = packer_left("nvidia_l40s-48c", firmware="bios")

    with pytest.raises(VsphereError, match="has bios firmware: vGPU nvidia_l40s-48c, nvidia_l40s-48c powers on only"):
        finish_gpu_template(si, vm.name, ["nvidia_l40s-48c", "nvidia_l40s-48c"], snapshot="base")

    assert vgpus(vm) == ["nvidia_l40s-48c"]
    assert vm.config.firmware == "bios" and vm.config.template is False
