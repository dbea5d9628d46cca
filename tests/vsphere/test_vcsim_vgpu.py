"""VgpuAttachment against the vCenter simulator (hosts offer grid_t4-* profiles)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy
from components.vsphere.vgpu import POWER_ON_MARKER, VgpuAttachmentProvider

pytestmark = pytest.mark.vcsim

FAST_RETRY = RetryPolicy(attempts=6, base_delay=0.1, max_delay=0.5, max_total=10)


def _vgpus(vm: Any) -> list[str]:
    return [
        d.backing.vgpu
        for d in vm.config.hardware.device
        if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
        and isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo)
    ]


def _vm_events(si: Any, vm: Any) -> list[str]:
    """Power and reconfigure events of a VM, oldest first."""
    spec = vim.event.EventFilterSpec(entity=vim.event.EventFilterSpec.ByEntity(entity=vm, recursion="self"))
    events = si.RetrieveContent().eventManager.QueryEvents(spec)
    kinds = {"VmPoweredOffEvent": "off", "VmPoweredOnEvent": "on", "VmReconfiguredEvent": "reconfig"}
    ordered = sorted(events, key=lambda e: e.key)
    return [kinds[type(e).__name__.split(".")[-1]] for e in ordered if type(e).__name__.split(".")[-1] in kinds]


def _inputs(vm: Any, *profiles: str) -> dict[str, Any]:
    return {"vm_id": vm.config.uuid, "vm_name": vm.name, "profiles": list(profiles)}


@pytest.fixture
def provider(configured: Callable[..., Any], extended: Any) -> VgpuAttachmentProvider:
    # A short guest-shutdown wait: the simulator powers off at once anyway.
    return configured(VgpuAttachmentProvider(power_timeout_minutes=0.05, retry=FAST_RETRY))


def test_attach_adds_vmiop_device_locks_memory_and_keeps_vm_on(provider: VgpuAttachmentProvider, fresh_vm: Any) -> None:
    assert fresh_vm.runtime.powerState == "poweredOn"
    inputs = provider.check({}, _inputs(fresh_vm, "grid_t4-16c")).inputs

    created = provider.create(inputs)

    assert _vgpus(fresh_vm) == ["grid_t4-16c"]
    assert fresh_vm.config.memoryReservationLockedToMax is True
    assert fresh_vm.runtime.powerState == "poweredOn"
    assert created.id == f"vgpu:{fresh_vm.config.uuid}"
    assert created.outs["profiles"] == ["grid_t4-16c"]
    assert created.outs["host_name"] == fresh_vm.runtime.host.name
    read = provider.read(created.id, created.outs)
    assert read.outs == created.outs
    assert provider.diff(created.id, read.outs, inputs).changes is False


def test_rerun_changes_nothing(provider: VgpuAttachmentProvider, fresh_vm: Any, si: Any) -> None:
    inputs = _inputs(fresh_vm, "grid_t4-16c")
    provider.create(inputs)
    keys = [d.key for d in fresh_vm.config.hardware.device]
    events = _vm_events(si, fresh_vm)

    provider.create(inputs)

    assert [d.key for d in fresh_vm.config.hardware.device] == keys
    assert _vm_events(si, fresh_vm) == events  # not reconfigured, not power-cycled


def test_profile_change_is_an_update_that_swaps_the_device(provider: VgpuAttachmentProvider, fresh_vm: Any) -> None:
    created = provider.create(_inputs(fresh_vm, "grid_t4-16c"))
    news = _inputs(fresh_vm, "grid_t4-8c")
    diff = provider.diff(created.id, created.outs, news)
    assert (diff.changes, diff.replaces) == (True, [])

    updated = provider.update(created.id, created.outs, news)

    assert _vgpus(fresh_vm) == ["grid_t4-8c"]
    assert updated.outs["profiles"] == ["grid_t4-8c"]
    assert fresh_vm.runtime.powerState == "poweredOn"


def test_two_profiles_attach_two_devices(provider: VgpuAttachmentProvider, fresh_vm: Any) -> None:
    provider.create(_inputs(fresh_vm, "grid_t4-8c", "grid_t4-8c"))
    assert _vgpus(fresh_vm) == ["grid_t4-8c", "grid_t4-8c"]


def test_delete_detaches_and_restores_power_state(provider: VgpuAttachmentProvider, fresh_vm: Any) -> None:
    created = provider.create(_inputs(fresh_vm, "grid_t4-16c"))

    provider.delete(created.id, created.outs)

    assert _vgpus(fresh_vm) == []
    assert fresh_vm.runtime.powerState == "poweredOn"


def test_powered_off_vm_stays_off(provider: VgpuAttachmentProvider, fresh_vm: Any) -> None:
    wait_for_task(fresh_vm.PowerOffVM_Task())

    created = provider.create(_inputs(fresh_vm, "grid_t4-4c"))
    assert fresh_vm.runtime.powerState == "poweredOff"
    provider.delete(created.id, created.outs)

    assert _vgpus(fresh_vm) == []
    assert fresh_vm.runtime.powerState == "poweredOff"


def test_drift_detached_by_hand_is_reported_and_repaired(provider: VgpuAttachmentProvider, fresh_vm: Any) -> None:
    inputs = _inputs(fresh_vm, "grid_t4-16c")
    created = provider.create(inputs)
    # Someone removes the vGPU in vCenter (the VM resource of pulumi-vsphere would not notice).
    device = next(d for d in fresh_vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualPCIPassthrough))
    wait_for_task(fresh_vm.PowerOffVM_Task())
    spec = vim.vm.ConfigSpec(deviceChange=[vim.vm.device.VirtualDeviceSpec(operation="remove", device=device)])
    wait_for_task(fresh_vm.ReconfigVM_Task(spec=spec))
    wait_for_task(fresh_vm.PowerOnVM_Task())

    refreshed = provider.read(created.id, created.outs)
    assert refreshed.outs["profiles"] == []
    assert provider.diff(created.id, refreshed.outs, inputs).changes is True

    provider.update(created.id, refreshed.outs, inputs)
    assert _vgpus(fresh_vm) == ["grid_t4-16c"]


def test_profile_not_offered_by_the_host_fails_before_touching_the_vm(
    provider: VgpuAttachmentProvider, fresh_vm: Any
) -> None:
    host = fresh_vm.runtime.host.name
    with pytest.raises(VsphereError) as info:
        provider.create(_inputs(fresh_vm, "grid_a100-40c"))

    assert str(info.value).endswith(
        f"vGPU profile grid_a100-40c is not offered by host {host} (offered: grid_t4-1c, "
        f"grid_t4-2c, grid_t4-4c, grid_t4-8c, grid_t4-16c); VM {fresh_vm.name}"
    )
    assert _vgpus(fresh_vm) == []
    assert fresh_vm.runtime.powerState == "poweredOn"


def test_vm_that_is_gone(provider: VgpuAttachmentProvider, fresh_vm: Any) -> None:
    inputs = _inputs(fresh_vm, "grid_t4-16c")
    created = provider.create(inputs)
    wait_for_task(fresh_vm.PowerOffVM_Task())
    wait_for_task(fresh_vm.Destroy_Task())

    assert provider.read(created.id, created.outs).id == ""
    provider.delete(created.id, created.outs)  # succeeds: nothing left to detach
    with pytest.raises(VsphereError, match=rf"VM {inputs['vm_name']} \(BIOS UUID .+\) not found"):
        provider.create(inputs)


def test_vm_id_is_the_bios_uuid_not_the_instance_uuid(provider: VgpuAttachmentProvider, fresh_vm: Any) -> None:
    inputs = {**_inputs(fresh_vm, "grid_t4-1c"), "vm_id": fresh_vm.config.instanceUuid}
    if fresh_vm.config.instanceUuid == fresh_vm.config.uuid:
        pytest.skip("simulator gave this VM the same BIOS and instance UUID")
    with pytest.raises(VsphereError, match="not found"):
        provider.create(inputs)


def _marked(vm: Any) -> bool:
    values = [o.value for o in vm.config.extraConfig or [] if o.key == POWER_ON_MARKER]
    return bool(values) and values[-1] == "true"  # the simulator appends instead of replacing


def test_vcenter_gone_after_power_off_is_fixed_by_a_rerun(
    configured: Callable[..., Any], extended: Any, tcp_proxy: Any, fresh_vm: Any
) -> None:
    provider = configured(
        VgpuAttachmentProvider(power_timeout_minutes=0.05, retry=RetryPolicy(attempts=1)), port=tcp_proxy.port
    )
    inputs = _inputs(fresh_vm, "grid_t4-16c")
    # vCenter vanishes when the device change is sent: the VM is already powered off by then.
    tcp_proxy.cut_on(b"VmiopBackingInfo")

    with pytest.raises(VsphereError, match=f"on VM {fresh_vm.name}"):
        provider.create(inputs)
    assert fresh_vm.runtime.powerState == "poweredOff"
    assert _vgpus(fresh_vm) == []
    assert _marked(fresh_vm)  # vCenter remembers the VM must come back on

    tcp_proxy.restore()
    created = provider.create(inputs)  # the next `pulumi up`

    assert _vgpus(fresh_vm) == ["grid_t4-16c"]
    assert fresh_vm.runtime.powerState == "poweredOn"
    assert not _marked(fresh_vm)
    assert provider.diff(created.id, provider.read(created.id, created.outs).outs, inputs).changes is False


def test_short_outage_during_attach_is_ridden_out_by_retries(
    configured: Callable[..., Any], extended: Any, tcp_proxy: Any, fresh_vm: Any
) -> None:
    provider = configured(VgpuAttachmentProvider(power_timeout_minutes=0.05, retry=FAST_RETRY), port=tcp_proxy.port)
    tcp_proxy.cut_on(b"VmiopBackingInfo", restore_after=0.2)

    provider.create(_inputs(fresh_vm, "grid_t4-16c"))

    assert tcp_proxy.cuts == 1
    assert _vgpus(fresh_vm) == ["grid_t4-16c"]
    assert fresh_vm.runtime.powerState == "poweredOn"
    assert not _marked(fresh_vm)
