"""VgpuAttachment against the vCenter simulator harness (hosts offer grid_t4-* profiles).

The harness plays vCenter's VM rules (vcsim/vm.go): vGPU devices change only while a VM is off,
VMware Tools answer only a while after power-on, a guest shutdown needs them. A GPU worker is a
clone of a template that carries its vGPU device, as the program makes it.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy
from components.vsphere.vgpu.attachment import POWER_ON_MARKER, NotAtBirth, VgpuAttachmentProvider
from tests.components.vsphere.conftest import CLUSTER_HOSTS, TEMPLATE_VM, _find
from tests.components.vsphere.graphics_helpers import set_active_graphics
from tests.components.vsphere.vm_helpers import (
    clone,
    destroy,
    events,
    off_windows,
    power_on,
    reconfigure,
    reserve_all_memory,
    timed_events,
    unique,
    vgpu_device_spec,
    vgpus,
    wait_for_tools,
)

pytestmark = pytest.mark.vcsim

FAST_RETRY = RetryPolicy(attempts=6, base_delay=0.1, max_delay=0.5, max_total=10)


def _inputs(vm: Any, *profiles: str, extra_config: dict[str, str] | None = None) -> dict[str, Any]:
    return {"vm_id": vm.config.uuid, "vm_name": vm.name, "profiles": list(profiles), "extra_config": extra_config or {}}


@pytest.fixture
def provider(configured: Callable[..., Any], extended: Any) -> VgpuAttachmentProvider:
    # Tools come up 1 s after power-on in the harness; 0.1 min leaves room for that.
    return configured(VgpuAttachmentProvider(power_timeout_minutes=0.1, retry=FAST_RETRY))


@pytest.fixture(scope="module")
def gpu_template(si: Any, vcsim: Any) -> Iterator[Any]:
    """A powered-off VM carrying one grid_t4-16c vGPU device: what `vcenter.gpuTemplate` names."""
    from tests.components.vsphere.conftest import _find

    template = clone(_find(si, vim.VirtualMachine, TEMPLATE_VM), unique("gpu-template"))
    reconfigure(template, deviceChange=[vgpu_device_spec("grid_t4-16c")])
    yield template
    destroy(template)


@pytest.fixture
def make_vm(request: Any) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def make(source: Any, *, on: bool = True, host: Any = None) -> Any:
        vm = clone(source, unique(f"t-{request.node.name[:30]}"), host)
        made.append(vm)
        reserve_all_memory(vm)
        if on:
            # A vGPU VM powers on only where the GPU runs Shared Direct (vcsim/graphics_power.go):
            # set it here, not rely on an earlier test file having left the host so.
            set_active_graphics(vm.runtime.host, "sharedDirect")
            power_on(vm)
        return vm

    yield make
    for vm in made:
        with contextlib.suppress(Exception):  # the test may have destroyed it already
            destroy(vm)


@pytest.fixture
def worker(make_vm: Callable[..., Any], gpu_template: Any) -> Any:
    """A GPU worker as the program makes it: cloned from the GPU template, just powered on."""
    return make_vm(gpu_template)


@pytest.fixture
def plain_vm(make_vm: Callable[..., Any], find: Callable[[Any, str], Any]) -> Any:
    """A running clone of a template without a vGPU device."""
    return make_vm(find(vim.VirtualMachine, TEMPLATE_VM))


def test_create_on_a_worker_cloned_with_its_vgpu_changes_nothing(
    provider: VgpuAttachmentProvider, worker: Any, si: Any
) -> None:
    before = events(si, worker)
    inputs = provider.check({}, _inputs(worker, "grid_t4-16c")).inputs

    created = provider.create(inputs)

    assert events(si, worker) == before  # not reconfigured, not power-cycled
    assert vgpus(worker) == ["grid_t4-16c"]
    assert worker.runtime.powerState == "poweredOn"
    assert created.id == f"vgpu:{worker.config.uuid}"
    assert created.outs["profiles"] == ["grid_t4-16c"]
    assert created.outs["host_name"] == worker.runtime.host.name
    read = provider.read(created.id, created.outs)
    assert read.outs == created.outs
    assert provider.diff(created.id, read.outs, inputs).changes is False


def test_create_never_power_cycles_a_booting_vm_that_lacks_its_vgpu(
    provider: VgpuAttachmentProvider, plain_vm: Any, si: Any
) -> None:
    """Defect 14.1: the old provider powered the first boot off hard (Tools not up yet)."""
    before = events(si, plain_vm)

    with pytest.raises(NotAtBirth, match=r"running without its vGPU configuration .*vcenter\.gpuTemplate"):
        provider.create(_inputs(plain_vm, "grid_t4-16c"))

    assert events(si, plain_vm) == before
    assert plain_vm.runtime.powerState == "poweredOn"
    assert vgpus(plain_vm) == []


def test_create_on_a_powered_off_vm_adds_the_device_and_leaves_it_off(
    provider: VgpuAttachmentProvider, make_vm: Callable[..., Any], find: Callable[[Any, str], Any]
) -> None:
    vm = make_vm(find(vim.VirtualMachine, TEMPLATE_VM), on=False)

    provider.create(_inputs(vm, "grid_t4-4c"))

    assert vgpus(vm) == ["grid_t4-4c"]
    assert vm.runtime.powerState == "poweredOff"


def test_large_bar_profile_gets_64bit_mmio_while_the_vm_is_off(
    provider: VgpuAttachmentProvider, make_vm: Callable[..., Any], find: Callable[[Any, str], Any]
) -> None:
    vm = make_vm(find(vim.VirtualMachine, TEMPLATE_VM), on=False)
    mmio = {"pciPassthru.use64bitMMIO": "TRUE", "pciPassthru.64bitMMIOSizeGB": "64"}

    created = provider.create(_inputs(vm, "grid_t4-16c", extra_config=mmio))

    assert created.outs["extra_config"] == mmio
    inputs = _inputs(vm, "grid_t4-16c", extra_config={**mmio, "pciPassthru.64bitMMIOSizeGB": "128"})
    assert provider.diff(created.id, created.outs, inputs).changes is True


def test_profile_change_shuts_the_guest_down_through_tools_and_powers_it_back_on(
    provider: VgpuAttachmentProvider, worker: Any, si: Any
) -> None:
    created = provider.create(_inputs(worker, "grid_t4-16c"))
    news = _inputs(worker, "grid_t4-8c")
    diff = provider.diff(created.id, created.outs, news)
    assert (diff.changes, diff.replaces) == (True, [])
    before = len(events(si, worker))

    updated = provider.update(created.id, created.outs, news)

    # Mark (power back on after), guest shutdown through Tools (never a hard power-off), swap the
    # device while off, power on, clear the mark.
    assert events(si, worker)[before:] == ["reconfig", "guest-shutdown", "off", "reconfig", "on", "reconfig"]
    assert vgpus(worker) == ["grid_t4-8c"]
    assert updated.outs["profiles"] == ["grid_t4-8c"]
    assert worker.runtime.powerState == "poweredOn"


def test_profile_change_on_a_guest_whose_tools_never_answer_is_an_error_not_a_hard_power_off(
    configured: Callable[..., Any], extended: Any, worker: Any, si: Any
) -> None:
    impatient = configured(VgpuAttachmentProvider(power_timeout_minutes=0.005, retry=FAST_RETRY))
    created = impatient.create(_inputs(worker, "grid_t4-16c"))
    before = events(si, worker)  # the guest is still booting: Tools not up

    with pytest.raises(VsphereError, match=r"VMware Tools did not answer .* \(no hard power-off\)"):
        impatient.update(created.id, created.outs, _inputs(worker, "grid_t4-8c"))

    assert events(si, worker)[len(before) :].count("off") == 0
    assert worker.runtime.powerState == "poweredOn"
    assert not _marked(worker)
    assert vgpus(worker) == ["grid_t4-16c"]


def test_profile_changes_of_a_pool_power_cycle_one_vm_at_a_time(
    provider: VgpuAttachmentProvider, make_vm: Callable[..., Any], gpu_template: Any, si: Any
) -> None:
    # One worker per host, as the stack places them: a T4 holds one grid_t4-16c (vcsim/vgpu_capacity.go).
    hosts = [_find(si, vim.HostSystem, name) for name in CLUSTER_HOSTS[1:]]
    for host in hosts:
        set_active_graphics(host, "sharedDirect")
    workers = [make_vm(gpu_template, host=host) for host in hosts]
    created = [provider.create(_inputs(vm, "grid_t4-16c")) for vm in workers]
    for vm in workers:
        wait_for_tools(vm)
    errors: list[BaseException] = []

    def change(vm: Any, old: Any) -> None:
        try:
            provider.update(old.id, old.outs, _inputs(vm, "grid_t4-8c"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=change, args=pair) for pair in zip(workers, created, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    windows = sorted(w for vm in workers for w in off_windows(timed_events(si, vm)))
    assert len(windows) == 3
    for (_, first_on), (next_off, _) in itertools.pairwise(windows):
        assert first_on < next_off, f"two GPU workers were down at once: {windows}"


def test_delete_never_powers_a_running_vm_on_or_off(provider: VgpuAttachmentProvider, worker: Any, si: Any) -> None:
    """Defect 14.7: the old delete powered the VM off, detached, and powered it back on just
    before pulumi-vsphere destroyed it."""
    created = provider.create(_inputs(worker, "grid_t4-16c"))
    before = events(si, worker)

    provider.delete(created.id, created.outs)

    assert events(si, worker) == before
    assert worker.runtime.powerState == "poweredOn"
    assert vgpus(worker) == ["grid_t4-16c"]  # goes with the VM


def test_delete_detaches_from_a_powered_off_vm_and_leaves_it_off(
    provider: VgpuAttachmentProvider, worker: Any, si: Any
) -> None:
    created = provider.create(_inputs(worker, "grid_t4-16c"))
    wait_for_task(worker.PowerOffVM_Task())

    provider.delete(created.id, created.outs)

    assert vgpus(worker) == []
    assert worker.runtime.powerState == "poweredOff"


def test_drift_detached_by_hand_is_reported_and_repaired_by_an_update(
    provider: VgpuAttachmentProvider, worker: Any
) -> None:
    inputs = _inputs(worker, "grid_t4-16c")
    created = provider.create(inputs)
    device = next(d for d in worker.config.hardware.device if isinstance(d, vim.vm.device.VirtualPCIPassthrough))
    wait_for_task(worker.PowerOffVM_Task())
    reconfigure(worker, deviceChange=[vim.vm.device.VirtualDeviceSpec(operation="remove", device=device)])
    power_on(worker)

    refreshed = provider.read(created.id, created.outs)
    assert refreshed.outs["profiles"] == []
    assert provider.diff(created.id, refreshed.outs, inputs).changes is True

    provider.update(created.id, refreshed.outs, inputs)
    assert vgpus(worker) == ["grid_t4-16c"]
    assert worker.runtime.powerState == "poweredOn"


def test_profile_not_offered_by_the_host_fails_before_touching_the_vm(
    provider: VgpuAttachmentProvider, plain_vm: Any
) -> None:
    host = plain_vm.runtime.host.name
    with pytest.raises(VsphereError) as info:
        provider.create(_inputs(plain_vm, "grid_a100-40c"))

    assert str(info.value).endswith(
        f"vGPU profile grid_a100-40c is not offered by host {host} (offered: grid_t4-4c, "
        f"grid_t4-8c, grid_t4-16c); VM {plain_vm.name}"
    )
    assert vgpus(plain_vm) == []
    assert plain_vm.runtime.powerState == "poweredOn"


def test_vm_that_is_gone(provider: VgpuAttachmentProvider, worker: Any) -> None:
    inputs = _inputs(worker, "grid_t4-16c")
    created = provider.create(inputs)
    destroy(worker)

    assert provider.read(created.id, created.outs).id == ""
    provider.delete(created.id, created.outs)  # succeeds: nothing left to detach
    with pytest.raises(VsphereError, match=rf"VM {inputs['vm_name']} \(BIOS UUID .+\) not found"):
        provider.create(inputs)


def test_vm_id_is_the_bios_uuid_not_the_instance_uuid(provider: VgpuAttachmentProvider, worker: Any) -> None:
    inputs = {**_inputs(worker, "grid_t4-16c"), "vm_id": worker.config.instanceUuid}
    if worker.config.instanceUuid == worker.config.uuid:
        pytest.skip("simulator gave this VM the same BIOS and instance UUID")
    with pytest.raises(VsphereError, match="not found"):
        provider.create(inputs)


def _marked(vm: Any) -> bool:
    values = [o.value for o in vm.config.extraConfig or [] if o.key == POWER_ON_MARKER]
    return bool(values) and values[-1] == "true"  # the simulator appends instead of replacing


def test_vcenter_gone_after_the_shutdown_is_fixed_by_a_rerun(
    configured: Callable[..., Any], extended: Any, tcp_proxy: Any, worker: Any, si: Any
) -> None:
    provider = configured(
        VgpuAttachmentProvider(power_timeout_minutes=0.1, retry=RetryPolicy(attempts=1)), port=tcp_proxy.port
    )
    created = provider.create(_inputs(worker, "grid_t4-16c"))
    news = _inputs(worker, "grid_t4-8c")
    # vCenter vanishes when the device change is sent: the guest is already shut down by then.
    tcp_proxy.cut_on(b"VmiopBackingInfo")

    with pytest.raises(VsphereError, match=f"on VM {worker.name}"):
        provider.update(created.id, created.outs, news)
    assert worker.runtime.powerState == "poweredOff"
    assert vgpus(worker) == ["grid_t4-16c"]
    assert _marked(worker)  # vCenter remembers the VM must come back on

    tcp_proxy.restore()
    updated = provider.update(created.id, created.outs, news)  # the next `pulumi up`

    assert vgpus(worker) == ["grid_t4-8c"]
    assert worker.runtime.powerState == "poweredOn"
    assert not _marked(worker)
    assert provider.diff(created.id, provider.read(created.id, updated.outs).outs, news).changes is False


def test_short_outage_during_a_profile_change_is_ridden_out_by_retries(
    configured: Callable[..., Any], extended: Any, tcp_proxy: Any, worker: Any
) -> None:
    provider = configured(VgpuAttachmentProvider(power_timeout_minutes=0.1, retry=FAST_RETRY), port=tcp_proxy.port)
    created = provider.create(_inputs(worker, "grid_t4-16c"))
    tcp_proxy.cut_on(b"VmiopBackingInfo", restore_after=0.2)

    provider.update(created.id, created.outs, _inputs(worker, "grid_t4-8c"))

    assert tcp_proxy.cuts == 1
    assert vgpus(worker) == ["grid_t4-8c"]
    assert worker.runtime.powerState == "poweredOn"
    assert not _marked(worker)
