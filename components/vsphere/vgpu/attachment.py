"""NVIDIA vGPU attachment: one `VirtualPCIPassthrough` with a vmiop backing per vGPU profile.

pulumi-vsphere cannot add a shared-PCI (vmiop) device and its VM read ignores such devices, so
this provider owns the VM's vGPU devices and the extraConfig they need (64-bit MMIO on large-BAR
boards): `read` reports them (vGPU drift shows up here, not on the VM resource), `create`/`update`
converge them with a desired-minus-existing diff, and `delete` removes them from a VM that is off.

A GPU worker gets its vGPU at birth: it is cloned from a template that already carries the device
(the clone keeps it), so `create` on a running VM only verifies. vSphere accepts vGPU device
changes only while the VM is powered off, so a running VM that lacks its vGPU at `create` is an
error naming the template, never a power cycle: seconds into a first boot, VMware Tools are not
running yet, and cutting the guest there cuts cloud-init's once-per-instance bootstrap.

A later profile change (`update`) power-cycles gracefully: it waits for VMware Tools, shuts the
guest down through them, reconfigures, powers on, one VM at a time per Pulumi run (a process-wide
lock), and never powers a guest off hard: a guest whose Tools never answer or that does not shut
down in time is an error that leaves the VM running. A profile change in the stack file is a
generation change: the rollout replaces each worker instead (`components.k8s.rollout.rollout`), so this
update only repairs a VM whose devices drifted.

`vm_id` is the pulumi-vsphere `VirtualMachine` id, which is the VM's BIOS UUID (`config.uuid`;
terraform-provider-vsphere looks VMs up with SearchIndex.FindByUuid(vmSearch=True,
instanceUuid=False)).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pulumi

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.vcenter.errors import VsphereError
from components.vcenter.lookups import find_vm_by_uuid, require_vm_by_uuid
from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy, VsphereProvider, check_vm_id, is_unknown, public_props
from components.vsphere.vgpu.devices import (
    VgpuDevice,
    VgpuPlan,
    build_config_spec,
    existing_vgpus,
    extra_config_changes,
    extra_config_of,
    plan_vgpu_devices,
)
from components.vsphere.vgpu.power import (
    POWER_ON_MARKER,
    finish_power_on,
    power_on_pending,
    set_power_on_marker,
    shut_down_guest,
)

__all__ = [
    "POWER_ON_MARKER",
    "NotAtBirth",
    "VgpuAttachment",
    "VgpuAttachmentProvider",
    "VgpuDevice",
    "VgpuPlan",
    "converge",
    "detach",
    "existing_vgpus",
    "plan_vgpu_devices",
]

#: Minutes to wait for VMware Tools, then again for the guest to shut down.
DEFAULT_POWER_TIMEOUT_MINUTES = 5.0

#: One vGPU power cycle at a time in this process. The gpucluster plugin serves every resource of
#: ours from one process (provider/) and the engine updates independent resources in parallel; a
#: profile change must take GPU workers down one by one, not the whole pool at once. `update` takes
#: it before its vCenter operation starts (issue 51: waited for inside the operation's 120 s
#: deadline, the turn of the fourth VM came after its deadline), and `converge` again inside (a
#: resumed cycle at `create`): reentrant.
_POWER_CYCLE = threading.RLock()


class NotAtBirth(VsphereError):
    """A running VM lacks its vGPU configuration at `create`: the template did not carry it."""


def converge(
    vm: Any,
    desired: Sequence[str],
    *,
    name: str,
    shutdown_timeout: float,
    extra_config: Mapping[str, str] | None = None,
    power_cycle: bool = True,
) -> None:
    """Make the VM's vGPU devices (and the extraConfig they need) match; a VM that was on ends on.

    A running VM that needs a change: with `power_cycle`, mark it (extraConfig) -> guest shutdown
    -> reconfigure -> power on -> clear the mark, one VM at a time; without, NotAtBirth. The mark,
    kept in vCenter rather than in this process, is what lets a re-run after a lost connection
    know the VM must be powered back on.
    """
    plan = plan_vgpu_devices(desired, existing_vgpus(vm))
    config = extra_config_changes(vm, extra_config or {})
    lock_memory = bool(desired) and not vm.config.memoryReservationLockedToMax
    pending = power_on_pending(vm)
    if plan.empty and not config:
        if lock_memory:
            # Only the reservation lock: vSphere allows it while the VM runs.
            wait_for_task(
                vm.ReconfigVM_Task(spec=build_config_spec(vm, plan, lock_memory=True)),
                object_name=name,
                what="lock memory reservation",
            )
        if pending:
            finish_power_on(vm, name=name)  # an earlier attempt was cut off after the shutdown
        return
    running = vm.runtime.powerState == "poweredOn"
    if running and not pending and not power_cycle:
        wanted = ", ".join(desired) or "none"
        raise NotAtBirth(
            f"VM {name} is running without its vGPU configuration (wanted: {wanted}; has: "
            f"{', '.join(d.profile for d in existing_vgpus(vm)) or 'none'}"
            f"{'; extraConfig ' + ', '.join(o.key for o in config) if config else ''}). vSphere changes vGPU "
            "devices only while a VM is off, and powering a first boot off cuts its cloud-init bootstrap, so "
            "nothing was changed: clone GPU workers from a template that carries the vGPU device "
            "(vcenter.gpuTemplate, docs/rdma-host-settings.md), then replace this VM",
            object_name=name,
        )
    with _POWER_CYCLE:
        restore_on = pending or vm.runtime.powerState == "poweredOn"
        if restore_on and not pending:
            set_power_on_marker(vm, True, name=name)
        try:
            shut_down_guest(vm, name=name, timeout=shutdown_timeout)
        except VsphereError:
            if vm.runtime.powerState == "poweredOn":
                set_power_on_marker(vm, False, name=name)  # still on: nothing to resume
            raise
        spec = build_config_spec(vm, plan, lock_memory=lock_memory)
        if config:
            spec.extraConfig = config
        try:
            wait_for_task(vm.ReconfigVM_Task(spec=spec), object_name=name, what="reconfigure vGPU devices")
        finally:
            # Power it back on even if the reconfigure failed: the VM should end as it started.
            if restore_on:
                finish_power_on(vm, name=name)


def detach(vm: Any, *, name: str) -> bool:
    """Remove the vGPU devices of a VM that is off; leave a running one untouched (False).

    Never powers anything on or off. Pulumi deletes an attachment before its VM (dependents
    first): when the VM is being destroyed, powering it off and on here would only boot the
    guest once more seconds before pulumi-vsphere shuts it down for good. The device goes
    with the VM, or is removed the next time the attachment is deleted while the VM is off.
    """
    plan = plan_vgpu_devices([], existing_vgpus(vm))
    if plan.empty or vm.runtime.powerState != "poweredOff":
        return plan.empty
    wait_for_task(
        vm.ReconfigVM_Task(spec=build_config_spec(vm, plan, lock_memory=False)),
        object_name=name,
        what="remove vGPU devices",
    )
    return True


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

    def _shutdown_timeout_s(self, props: dict[str, Any]) -> float:
        """The resource's own `power_timeout_minutes` input (a setting of the provider object
        while it was a dynamic provider; states from then lack it: the default applies)."""
        minutes = props.get("power_timeout_minutes")
        return self.shutdown_timeout_s if minutes is None else float(minutes) * 60.0

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.CheckResult:
        inputs = public_props(news)
        failures = check_vm_id(inputs)
        profiles = inputs.get("profiles")
        if not is_unknown(profiles):
            if (
                not isinstance(profiles, list)
                or not profiles
                or not all(isinstance(p, str) and p.strip() for p in profiles)
            ):
                failures.append(handlers.CheckFailure("profiles", "must be a non-empty list of vGPU profile names"))
            elif not any(is_unknown(p) for p in profiles):
                inputs["profiles"] = [p.strip() for p in profiles]
        extra = inputs.get("extra_config")
        if extra is None:
            inputs["extra_config"] = {}
        elif not is_unknown(extra) and (
            not isinstance(extra, dict) or not all(isinstance(v, str) for v in extra.values())
        ):
            failures.append(handlers.CheckFailure("extra_config", "must map extraConfig keys to strings"))
        return handlers.CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        replaces = ["vm_id"] if str(olds.get("vm_id", "")).lower() != str(news.get("vm_id", "")).lower() else []
        changes = (
            bool(replaces)
            or sorted(olds.get("profiles") or []) != sorted(news.get("profiles") or [])
            or olds.get("memory_reservation_locked_to_max") is not True
            or olds.get("vm_name") != news.get("vm_name")
            or (olds.get("extra_config") or {}) != (news.get("extra_config") or {})
        )
        # Delete before replace: the old VM's vGPU must release the GPU before another VM on the
        # same host can power on with one (vGPU capacity per physical GPU is fixed).
        return handlers.DiffResult(changes=changes, replaces=replaces, delete_before_replace=True)

    def _outs(self, vm: Any, props: dict[str, Any]) -> dict[str, Any]:
        return {
            "vm_id": props["vm_id"],
            "vm_name": props.get("vm_name") or vm.name,
            "profiles": [d.profile for d in existing_vgpus(vm)],
            "host_name": host_of(vm).name,
            "power_state": str(vm.runtime.powerState),
            "memory_reservation_locked_to_max": bool(vm.config.memoryReservationLockedToMax),
            # Live values of the keys we manage: a key set by hand differently shows as drift.
            "extra_config": extra_config_of(vm, list(props.get("extra_config") or {})),
        }

    def _cycle_policy(self, props: dict[str, Any]) -> RetryPolicy:
        """The bound of an operation that may power-cycle: the usual one, plus the guest's own
        time (`power_timeout_minutes` for VMware Tools to answer, then again for the shutdown,
        as `shut_down_guest` waits), so a guest slow to shut down is not cut off half way and left
        off with its power-on mark set."""
        return replace(self.retry, max_total=self.retry.max_total + 2 * self._shutdown_timeout_s(props))

    def _apply(self, props: dict[str, Any], *, power_cycle: bool, retry: RetryPolicy | None = None) -> dict[str, Any]:
        vm_id: str = props["vm_id"]
        vm_name: str = props.get("vm_name") or vm_id
        profiles: list[str] = list(props["profiles"])
        extra_config: dict[str, str] = dict(props.get("extra_config") or {})

        def op(si: Any) -> dict[str, Any]:
            vm = require_vm_by_uuid(si, vm_id, vm_name)
            check_profiles_offered(vm, profiles)
            converge(
                vm,
                profiles,
                name=vm_name,
                shutdown_timeout=self._shutdown_timeout_s(props),
                extra_config=extra_config,
                power_cycle=power_cycle,
            )
            return self._outs(vm, props)

        return self.run(op, what=f"vGPU {', '.join(profiles)} on VM {vm_name}", retry=retry)

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        # The VM was just cloned and powered on: it is booting for the first time. Verify only.
        return handlers.CreateResult(id_=f"vgpu:{props['vm_id']}", outs=self._apply(props, power_cycle=False))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        # A profile change on a node that has been up: graceful power cycle, one VM at a time. The
        # turn is waited for before the operation and its deadline start, however long the VMs
        # before it take; the operation's bound then covers the power cycle's own waits.
        with _POWER_CYCLE:
            return handlers.UpdateResult(outs=self._apply(news, power_cycle=True, retry=self._cycle_policy(news)))

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        vm_id = props["vm_id"]

        def op(si: Any) -> dict[str, Any] | None:
            vm = find_vm_by_uuid(si, vm_id)
            return None if vm is None else self._outs(vm, props)

        outs = self.run(op, what=f"read vGPU devices of VM {props.get('vm_name') or vm_id}")
        if outs is None:
            return handlers.ReadResult(id_="", outs={})  # VM gone: attachment gone
        return handlers.ReadResult(id_=id_, outs=outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        vm_id = props["vm_id"]
        vm_name = props.get("vm_name") or vm_id

        def op(si: Any) -> None:
            vm = find_vm_by_uuid(si, vm_id)
            if vm is None:
                return  # the VM went first; nothing to detach
            # No power change here (see `detach`). The memory reservation lock stays: the VM
            # resource declares it too, and undoing it here would fight that resource.
            detach(vm, name=vm_name)

        self.run(op, what=f"detach vGPU from VM {vm_name}")


class VgpuAttachment(GpuclusterResource, module="vsphere", name="VgpuAttachment"):
    """Attaches NVIDIA vGPU profiles to a VM (one vmiop PCI device per profile).

    Type token: `gpucluster:vsphere:VgpuAttachment`. The resource owns all vGPU
    devices of the VM and the extraConfig keys they need. `create` verifies what the VM got from
    its template and changes nothing on a running VM; changing `profiles` updates in place
    (guest shutdown through VMware Tools, swap devices, power on, one VM at a time); `delete`
    never powers anything on or off. Changing `vm_id` replaces it.
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
    # The output `extra_config` (live values of the keys the vGPUs need) is not declared as an
    # attribute: a dict output would need the SDK's type conversion (components/gpucluster_resource.py).

    def __init__(
        self,
        resource_name: str,
        *,
        vm_id: pulumi.Input[str],
        vm_name: pulumi.Input[str],
        profiles: Sequence[str],
        extra_config: Mapping[str, str] | None = None,
        power_timeout_minutes: float = DEFAULT_POWER_TIMEOUT_MINUTES,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """
        :param vm_id: the pulumi-vsphere `VirtualMachine` id (BIOS UUID), e.g. `vm.id`.
        :param vm_name: the VM's name, used in messages.
        :param profiles: one or more vGPU profiles, e.g. ["grid_t4-16c"]; each must be offered by
            the VM's host.
        :param extra_config: VM extraConfig the vGPUs need (`vgpu_profiles.vgpu_extra_config`:
            64-bit MMIO on large-BAR boards), set with the devices while the VM is off.
        :param power_timeout_minutes: on a profile change, how long to wait for VMware Tools and
            then for the guest shutdown (default 5 minutes); never followed by a hard power-off.
        """
        if not profiles:
            raise ValueError(f"{resource_name}: profiles must name at least one vGPU profile")
        super().__init__(
            resource_name,
            {
                "vm_id": vm_id,
                "vm_name": vm_name,
                "profiles": list(profiles),
                "extra_config": dict(extra_config or {}),
                "power_timeout_minutes": power_timeout_minutes,
                "host_name": None,
                "power_state": None,
                "memory_reservation_locked_to_max": None,
            },
            opts,
        )
