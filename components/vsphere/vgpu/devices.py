"""Which vGPU devices a VM has, and the device and extraConfig changes that make it match.

Pure planning (`plan_vgpu_devices`: desired minus existing, as multisets) plus the pyVmomi reads
and the config spec built from a plan. Used by `vgpu` (the provider); `template_facts` gives `gpu_template`'s pure checks a template's facts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyVmomi import vim

from components.vsphere.gpu_template import TemplateFacts, hardware_version_number


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


def extra_config_of(vm: Any, keys: Sequence[str]) -> dict[str, str]:
    """The VM's values of these extraConfig keys (absent keys left out; the last entry wins)."""
    found: dict[str, str] = {}
    for option in vm.config.extraConfig or []:
        if option.key in keys:
            found[option.key] = str(option.value or "")
    return {k: v for k, v in found.items() if v}


def extra_config_changes(vm: Any, desired: Mapping[str, str]) -> list[Any]:
    current = extra_config_of(vm, list(desired))
    return [vim.option.OptionValue(key=k, value=v) for k, v in desired.items() if current.get(k) != v]


def template_facts(vm: Any) -> TemplateFacts:
    """What `gpu_template`'s checks need from a template VM (pyVmomi `vim.VirtualMachine`)."""
    config = vm.config
    extra: dict[str, str] = {}
    for option in config.extraConfig or []:
        extra[option.key] = str(option.value or "")  # the last entry wins
    return TemplateFacts(
        name=vm.name,
        vgpu_profiles=tuple(d.profile for d in existing_vgpus(vm)),
        firmware=str(config.firmware or "bios"),
        hardware_version=hardware_version_number(config.version),
        extra_config=extra,
    )
