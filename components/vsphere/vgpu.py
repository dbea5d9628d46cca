"""NVIDIA vGPU attachment: one `VirtualPCIPassthrough` with a vmiop backing per vGPU profile.

pulumi-vsphere cannot add a shared-PCI (vmiop) device and its VM read ignores such devices, so
this provider owns the VM's vGPU devices: `read` reports them (vGPU drift shows up here, not on
the VM resource), `create`/`update` converge them with a desired-minus-existing diff, and
`delete` removes them. vSphere only accepts vGPU device changes while the VM is powered off and
needs all guest memory reserved; the provider powers the VM off (guest shutdown, then hard
power-off after a timeout), reconfigures it, locks the memory reservation to max, and powers it
back on if it was on.

`vm_id` is the pulumi-vsphere `VirtualMachine` id, which is the VM's BIOS UUID (`config.uuid`;
terraform-provider-vsphere looks VMs up with SearchIndex.FindByUuid(vmSearch=True,
instanceUuid=False)).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic
from pyVmomi import vim

from components.dynamic_resource import DynamicResource
from components.vcenter.errors import VsphereError
from components.vcenter.lookups import find_vm_by_uuid
from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy, VsphereProvider, is_unknown, public_props

#: Minutes to wait for a guest shutdown before a hard power-off.
DEFAULT_POWER_TIMEOUT_MINUTES = 5.0


@dataclass(frozen=True)
class VgpuDevice:
    """An existing vGPU device on a VM: its device key and profile."""

    key: int
    profile: str


@dataclass(frozen=True)
class VgpuPlan:
    """What to change: profiles to add, device keys to remove."""

    add: tuple[str, ...]
    remove: tuple[int, ...]

    @property
    def empty(self) -> bool:
        return not self.add and not self.remove


def plan_vgpu_devices(desired: Sequence[str], existing: Sequence[VgpuDevice]) -> VgpuPlan:
    """Desired minus existing, as multisets: keep matching devices, remove extras, add missing.

    Devices are kept in their existing order (the first matches stay), so a re-run that is
    already converged plans nothing, and a profile change removes the old device and adds the
    new one.
    """
    wanted = Counter(desired)
    remove: list[int] = []
    for device in existing:
        if wanted[device.profile] > 0:
            wanted[device.profile] -= 1
        else:
            remove.append(device.key)
    add: list[str] = []
    for profile in desired:  # desired order, not Counter order, for stable device order
        if wanted[profile] > 0:
            wanted[profile] -= 1
            add.append(profile)
    return VgpuPlan(add=tuple(add), remove=tuple(remove))


def existing_vgpus(vm: Any) -> list[VgpuDevice]:
    devices = vm.config.hardware.device if vm.config else []
    return [
        VgpuDevice(key=d.key, profile=d.backing.vgpu or "")
        for d in devices
        if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
        and isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo)
    ]


def build_config_spec(vm: Any, plan: VgpuPlan, *, lock_memory: bool) -> Any:
    by_key = {d.key: d for d in vm.config.hardware.device}
    changes = [
        vim.vm.device.VirtualDeviceSpec(operation=vim.vm.device.VirtualDeviceSpec.Operation.remove, device=by_key[key])
        for key in plan.remove
    ]
    for index, profile in enumerate(plan.add):
        changes.append(
            vim.vm.device.VirtualDeviceSpec(
                operation=vim.vm.device.VirtualDeviceSpec.Operation.add,
                device=vim.vm.device.VirtualPCIPassthrough(
                    key=-(100 + index),  # temporary key; vCenter assigns the real one
                    backing=vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=profile),
                ),
            )
        )
    spec = vim.vm.ConfigSpec(deviceChange=changes)
    if lock_memory:
        spec.memoryReservationLockedToMax = True
    return spec


def power_off(vm: Any, *, name: str, timeout: float) -> None:
    """Guest shutdown when VMware Tools run, waiting up to `timeout`; else hard power-off."""
    if vm.runtime.powerState == "poweredOff":
        return
    if vm.guest is not None and vm.guest.toolsRunningStatus == "guestToolsRunning":
        try:
            vm.ShutdownGuest()
        except (vim.fault.ToolsUnavailable, vim.fault.InvalidState, vim.fault.InvalidPowerState):
            pass  # fall through to the hard power-off
        else:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if vm.runtime.powerState == "poweredOff":
                    return
                time.sleep(1.0)
    if vm.runtime.powerState != "poweredOff":
        wait_for_task(vm.PowerOffVM_Task(), object_name=name, what="power off")


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


def converge(vm: Any, desired: Sequence[str], *, name: str, shutdown_timeout: float) -> None:
    """Make the VM's vGPU devices match `desired`; a VM that was on ends on again.

    Sequence for a running VM: mark it (extraConfig) -> power off -> reconfigure devices ->
    power on -> clear the mark. The mark, kept in vCenter rather than in this process, is what
    lets a re-run after a lost connection know the VM must be powered back on.
    """
    plan = plan_vgpu_devices(desired, existing_vgpus(vm))
    lock_memory = bool(desired) and not vm.config.memoryReservationLockedToMax
    pending = power_on_pending(vm)
    if plan.empty:
        if lock_memory:
            # Only the reservation lock: vSphere allows it while the VM runs.
            wait_for_task(
                vm.ReconfigVM_Task(spec=build_config_spec(vm, plan, lock_memory=True)),
                object_name=name,
                what="lock memory reservation",
            )
        if pending:
            finish_power_on(vm, name=name)  # an earlier attempt was cut off after power-off
        return
    restore_on = pending or vm.runtime.powerState == "poweredOn"
    if restore_on and not pending:
        set_power_on_marker(vm, True, name=name)
    power_off(vm, name=name, timeout=shutdown_timeout)
    try:
        wait_for_task(
            vm.ReconfigVM_Task(spec=build_config_spec(vm, plan, lock_memory=lock_memory)),
            object_name=name,
            what="reconfigure vGPU devices",
        )
    finally:
        # Power it back on even if the reconfigure failed: the VM should end as it started.
        if restore_on:
            finish_power_on(vm, name=name)


def host_of(vm: Any) -> Any:
    host = vm.runtime.host
    if host is None:
        raise VsphereError(f"VM {vm.name} has no host (is it registered?)", object_name=vm.name)
    return host


def check_profiles_offered(vm: Any, profiles: Sequence[str]) -> None:
    host = host_of(vm)
    offered = list(host.config.sharedPassthruGpuTypes or []) if host.config else []
    for profile in dict.fromkeys(profiles):
        if profile not in offered:
            raise VsphereError(
                f"vGPU profile {profile} is not offered by host {host.name} "
                f"(offered: {', '.join(offered) or 'none'}); VM {vm.name}",
                object_name=vm.name,
            )


class VgpuAttachmentProvider(VsphereProvider):
    """Dynamic provider for `VgpuAttachment`."""

    def __init__(
        self,
        *,
        power_timeout_minutes: float = DEFAULT_POWER_TIMEOUT_MINUTES,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(retry=retry)
        self.shutdown_timeout_s = power_timeout_minutes * 60.0

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.CheckResult:
        inputs = public_props(news)
        failures: list[pulumi.dynamic.CheckFailure] = []
        vm_id = inputs.get("vm_id")
        if not is_unknown(vm_id):
            if not isinstance(vm_id, str) or not vm_id.strip():
                failures.append(pulumi.dynamic.CheckFailure("vm_id", "must be a VM BIOS UUID"))
            else:
                inputs["vm_id"] = vm_id.strip().lower()
        profiles = inputs.get("profiles")
        if not is_unknown(profiles):
            if (
                not isinstance(profiles, list)
                or not profiles
                or not all(isinstance(p, str) and p.strip() for p in profiles)
            ):
                failures.append(
                    pulumi.dynamic.CheckFailure("profiles", "must be a non-empty list of vGPU profile names")
                )
            elif not any(is_unknown(p) for p in profiles):
                inputs["profiles"] = [p.strip() for p in profiles]
        return pulumi.dynamic.CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        replaces = ["vm_id"] if str(olds.get("vm_id", "")).lower() != str(news.get("vm_id", "")).lower() else []
        changes = (
            bool(replaces)
            or sorted(olds.get("profiles") or []) != sorted(news.get("profiles") or [])
            or olds.get("memory_reservation_locked_to_max") is not True
            or olds.get("vm_name") != news.get("vm_name")
        )
        # Delete before replace: the old VM's vGPU must release the GPU before another VM on the
        # same host can power on with one (vGPU capacity per physical GPU is fixed).
        return pulumi.dynamic.DiffResult(changes=changes, replaces=replaces, delete_before_replace=True)

    def _outs(self, vm: Any, props: dict[str, Any]) -> dict[str, Any]:
        return {
            "vm_id": props["vm_id"],
            "vm_name": props.get("vm_name") or vm.name,
            "profiles": [d.profile for d in existing_vgpus(vm)],
            "host_name": host_of(vm).name,
            "power_state": str(vm.runtime.powerState),
            "memory_reservation_locked_to_max": bool(vm.config.memoryReservationLockedToMax),
        }

    def _apply(self, props: dict[str, Any]) -> dict[str, Any]:
        vm_id: str = props["vm_id"]
        vm_name: str = props.get("vm_name") or vm_id
        profiles: list[str] = list(props["profiles"])

        def op(si: Any) -> dict[str, Any]:
            vm = find_vm_by_uuid(si, vm_id)
            if vm is None:
                raise VsphereError(f"VM {vm_name} (BIOS UUID {vm_id}) not found in vCenter", object_name=vm_name)
            check_profiles_offered(vm, profiles)
            converge(vm, profiles, name=vm_name, shutdown_timeout=self.shutdown_timeout_s)
            return self._outs(vm, props)

        return self.run(op, what=f"vGPU {', '.join(profiles)} on VM {vm_name}")

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        return pulumi.dynamic.CreateResult(id_=f"vgpu:{props['vm_id']}", outs=self._apply(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        return pulumi.dynamic.UpdateResult(outs=self._apply(news))

    def read(self, id_: str, props: dict[str, Any]) -> pulumi.dynamic.ReadResult:
        vm_id = props["vm_id"]

        def op(si: Any) -> dict[str, Any] | None:
            vm = find_vm_by_uuid(si, vm_id)
            return None if vm is None else self._outs(vm, props)

        outs = self.run(op, what=f"read vGPU devices of VM {props.get('vm_name') or vm_id}")
        if outs is None:
            return pulumi.dynamic.ReadResult(id_="", outs={})  # VM gone: attachment gone
        return pulumi.dynamic.ReadResult(id_=id_, outs=outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        vm_id = props["vm_id"]
        vm_name = props.get("vm_name") or vm_id

        def op(si: Any) -> None:
            vm = find_vm_by_uuid(si, vm_id)
            if vm is None:
                return  # the VM went first; nothing to detach
            # The memory reservation lock stays: the VM resource declares it too, and undoing
            # it here would fight that resource.
            converge(vm, [], name=vm_name, shutdown_timeout=self.shutdown_timeout_s)

        self.run(op, what=f"detach vGPU from VM {vm_name}")


class VgpuAttachment(DynamicResource, module="vsphere", name="VgpuAttachment"):
    """Attaches NVIDIA vGPU profiles to a VM (one vmiop PCI device per profile).

    Type token: `pulumi-python:dynamic/vsphere:VgpuAttachment`. The resource owns all vGPU
    devices of the VM. Changing `vm_id` replaces it (detach from the old VM first); changing
    `profiles` updates in place (power off, swap devices, power on).
    """

    vm_id: pulumi.Output[str]
    """BIOS UUID of the VM (the pulumi-vsphere VirtualMachine id)."""
    vm_name: pulumi.Output[str]
    """The VM's name, for messages."""
    profiles: pulumi.Output[list[str]]
    """vGPU profiles attached (live value after a refresh), in device order."""
    host_name: pulumi.Output[str]
    """The ESXi host the VM ran on when last read."""
    power_state: pulumi.Output[str]
    """The VM's power state when last read."""
    memory_reservation_locked_to_max: pulumi.Output[bool]
    """Whether all guest memory is reserved (vGPU requires it)."""

    def __init__(
        self,
        resource_name: str,
        *,
        vm_id: pulumi.Input[str],
        vm_name: pulumi.Input[str],
        profiles: Sequence[str],
        power_timeout_minutes: float = DEFAULT_POWER_TIMEOUT_MINUTES,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """
        :param vm_id: the pulumi-vsphere `VirtualMachine` id (BIOS UUID), e.g. `vm.id`.
        :param vm_name: the VM's name, used in messages.
        :param profiles: one or more vGPU profiles, e.g. ["grid_t4-16c"]; each must be offered by
            the VM's host.
        :param power_timeout_minutes: how long to wait for a guest shutdown before a hard
            power-off (default 5 minutes).
        """
        if not profiles:
            raise ValueError(f"{resource_name}: profiles must name at least one vGPU profile")
        super().__init__(
            VgpuAttachmentProvider(power_timeout_minutes=power_timeout_minutes),
            resource_name,
            {
                "vm_id": vm_id,
                "vm_name": vm_name,
                "profiles": list(profiles),
                "host_name": None,
                "power_state": None,
                "memory_reservation_locked_to_max": None,
            },
            opts,
        )
