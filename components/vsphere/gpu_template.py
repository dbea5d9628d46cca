"""Is the GPU workers' template fit to give each worker its vGPU at birth? Pure checks for preflight.

A GPU worker is cloned from `vcenter.gpuTemplate` and powered on by pulumi-vsphere straight away,
so whatever the worker needs at its first power-on must already be in the template: one vmiop
vGPU device per profile of the stack, and on large-BAR boards EFI firmware and 64-bit MMIO
(`vgpu_profiles`). The control plane's template must carry no vGPU (its VMs reserve no memory,
and a vGPU VM without full reservation does not power on).

Pure: no pyVmomi, no Pulumi. The facts come from plain data: `components.vsphere.vgpu.devices.
template_facts` reads them from a pyVmomi VM, and preflight builds them from its inventory
snapshot (`components.vcenter.inventory_model.VmInfo`, stacks/tools/preflight/checks/templates.py);
`gpu_template_findings` and `control_plane_template_findings` judge them without vCenter.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from components.vsphere.vgpu.profiles import (
    MMIO_SIZE_GB,
    USE_64BIT_MMIO,
    mmio_size_gb,
    needs_64bit_mmio,
    vgpu_extra_config,
)

Level = Literal["OK", "WARN", "BLOCKER"]

TEMPLATE_BUILD = "templates/README.md: the checklist and a Packer build of both templates"
"""Where the two templates are described and built (templates/packer/gpu adds the vGPU device)."""
TEMPLATE_STEP = "python -m components.vsphere.vgpu.template_step"
"""The step that gives the GPU template its other vGPUs after Packer (templates/README.md)."""
ADD_DEVICE_HOW = (
    "with the template powered off (convert it to a VM first): Edit Settings > Add New Device > "
    "PCI Device > NVIDIA GRID vGPU, pick the profile, reserve all guest memory, convert it back; "
    f"or rebuild it ({TEMPLATE_BUILD})"
)


@dataclass(frozen=True)
class Finding:
    level: Level
    key: str
    """The stack key the finding is about (what the user edits)."""
    message: str


@dataclass(frozen=True)
class TemplateFacts:
    name: str
    vgpu_profiles: tuple[str, ...] = ()
    firmware: str = "bios"
    hardware_version: int = 0
    extra_config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuTemplateBuild:
    """What the GPU workers' template must carry for a list of vGPU profiles, and who adds what.

    Packer's vsphere-clone builder adds ONE vGPU device: `vgpu_profile` is a single string, and its
    reconfigure adds a device when the VM has no PCI device, edits the one it has, and does nothing
    when it has more (hashicorp/packer-plugin-vsphere builder/vsphere/common/step_hardware.go
    `VGPUProfile string`; builder/vsphere/driver/vm.go `Configure`). Its
    `pci_passthrough_allowed_device` is Dynamic DirectPath I/O (a `DynamicBackingInfo`), not a
    vGPU. So Packer adds the first profile (the driver's install needs a vGPU to see) and, with
    more than one, leaves the VM unsealed for `TEMPLATE_STEP`, which adds the rest while the VM is
    off, then takes the snapshot and makes it a template."""

    profiles: tuple[str, ...]
    firmware: str
    """efi when a profile is on a large-BAR board (bios is also fine otherwise; the base is efi)."""
    extra_config: Mapping[str, str]
    """The 64-bit MMIO keys (`vgpu_extra_config`); empty on small-BAR boards."""

    @property
    def packer_profile(self) -> str:
        """The profile Packer's `vgpu_profile` adds (the first)."""
        return self.profiles[0]

    @property
    def added_after_packer(self) -> tuple[str, ...]:
        """The profiles `TEMPLATE_STEP` adds (all but the first)."""
        return self.profiles[1:]

    @property
    def mmio_size_gb(self) -> int:
        """`pciPassthru.64bitMMIOSizeGB`, 0 when the boards need no 64-bit MMIO."""
        return int(self.extra_config.get(MMIO_SIZE_GB, "0"))

    def summary(self) -> str:
        """One line for `plan`: the devices, firmware and MMIO size of the template."""
        count = len(self.profiles)
        devices = f"{count} vGPU device{'s' if count != 1 else ''} ({', '.join(self.profiles)})"
        if not self.mmio_size_gb:
            return f"{devices}; no 64-bit MMIO (small-BAR board)"
        return f"{devices}; firmware {self.firmware}, 64-bit MMIO {self.mmio_size_gb} GB ({MMIO_SIZE_GB})"


def gpu_template_build(profiles: Sequence[str]) -> GpuTemplateBuild:
    """The template a worker with these vGPUs is cloned from; ValueError on no or malformed profiles."""
    if not profiles:
        raise ValueError("a GPU template needs at least one vGPU profile")
    extra = vgpu_extra_config(profiles)
    return GpuTemplateBuild(profiles=tuple(profiles), firmware="efi" if extra else "bios", extra_config=extra)


def hardware_version_number(version: str | None) -> int:
    """`config.version` (`vmx-19`) as a number; 0 when unknown."""
    digits = str(version or "").removeprefix("vmx-")
    return int(digits) if digits.isdigit() else 0


def gpu_template_findings(
    facts: TemplateFacts,
    *,
    profiles: Sequence[str],
    hardware_version: int,
    key: str = "vcenter.gpuTemplate",
) -> list[Finding]:
    """Judge the GPU workers' template against the stack's profiles and hardware version."""
    found: list[Finding] = []
    if Counter(facts.vgpu_profiles) != Counter(profiles):
        carried = ", ".join(facts.vgpu_profiles) or "no vGPU device"
        found.append(
            Finding(
                "BLOCKER",
                key,
                f"template {facts.name} carries {carried}, gpuWorkers.vgpuProfiles asks for {', '.join(profiles)}: "
                f"each worker must have its vGPU at first power-on; add it to the template ({ADD_DEVICE_HOW}), "
                "or name a template that has it",
            )
        )
    if needs_64bit_mmio(profiles):
        need = mmio_size_gb(profiles)
        problems = []
        if facts.firmware != "efi":
            problems.append(f"firmware is {facts.firmware}, not efi (reinstall the guest with EFI)")
        if facts.extra_config.get(USE_64BIT_MMIO, "").upper() != "TRUE":
            problems.append(f"{USE_64BIT_MMIO} is not TRUE")
        size = facts.extra_config.get(MMIO_SIZE_GB, "")
        if not size.isdigit() or int(size) < need:
            problems.append(f"{MMIO_SIZE_GB} is {size or 'unset'}, needs {need}")
        if problems:
            found.append(
                Finding(
                    "BLOCKER",
                    key,
                    f"template {facts.name}: vGPU {', '.join(profiles)} needs 64-bit MMIO at power-on (VMware KB "
                    f"2142307), vCenter will refuse to start the workers: {'; '.join(problems)}",
                )
            )
    if facts.hardware_version > hardware_version:
        found.append(
            Finding(
                "WARN",
                "vm.hardwareVersion",
                f"template {facts.name} is at hardware version {facts.hardware_version}, above vm.hardwareVersion "
                f"{hardware_version}: the clones keep {facts.hardware_version} (vSphere cannot downgrade); "
                f"set vm.hardwareVersion: {facts.hardware_version} to say so",
            )
        )
    if not found:
        found.append(Finding("OK", key, f"template {facts.name} carries {', '.join(profiles)}"))
    return found


TOOLKIT_VERSION_KEY = "gpucluster.nvidiaContainerToolkitVersion"
"""extraConfig key where the GPU template's Packer build records the NVIDIA Container Toolkit it
installed (templates/packer/gpu: `nvidia_container_toolkit_version`). A plain key, not
`guestinfo.*`: the guest cannot change it, and every clone carries it."""
_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:[-+.~].*)?")


def toolkit_findings(facts: TemplateFacts, *, minimum: str, key: str = "vcenter.gpuTemplate") -> list[Finding]:
    """The GPU template's NVIDIA Container Toolkit must have the CVE-2025-23266 fix (device-plugin
    mode: the template's toolkit is the one containerd runs containers with). Only what its build
    recorded can be judged here; the bootstrap checks `nvidia-ctk --version` on every node too."""
    recorded = facts.extra_config.get(TOOLKIT_VERSION_KEY, "").strip()
    if not recorded:
        return [
            Finding(
                "WARN",
                key,
                f"template {facts.name} does not record its NVIDIA Container Toolkit version (extraConfig "
                f"{TOOLKIT_VERSION_KEY}, written by {TEMPLATE_BUILD.split(':')[0]}'s Packer build); the bootstrap "
                f"refuses a toolkit older than {minimum} (CVE-2025-23266) on each GPU worker at first boot",
            )
        ]
    found = _VERSION.fullmatch(recorded)
    wanted = _VERSION.fullmatch(minimum)
    assert wanted is not None, minimum
    if found is None:
        return [
            Finding(
                "WARN",
                key,
                f"template {facts.name}: {TOOLKIT_VERSION_KEY} is {recorded!r}, not a version; the bootstrap checks "
                f"the toolkit on each GPU worker (at least {minimum})",
            )
        ]
    if tuple(map(int, found.groups())) < tuple(map(int, wanted.groups())):
        return [
            Finding(
                "BLOCKER",
                key,
                f"template {facts.name} has NVIDIA Container Toolkit {recorded}, older than {minimum}: a container "
                "image can reach host root through its hook (CVE-2025-23266), and the bootstrap refuses it on "
                f"every GPU worker; rebuild the template with nvidia_container_toolkit_version {minimum} or later "
                f"({TEMPLATE_BUILD.split(':')[0]})",
            )
        ]
    return [Finding("OK", key, f"template {facts.name} has NVIDIA Container Toolkit {recorded} (at least {minimum})")]


def control_plane_template_findings(facts: TemplateFacts, *, key: str = "vcenter.template") -> list[Finding]:
    """The control plane's template must carry no vGPU device (its clones would not power on)."""
    if facts.vgpu_profiles:
        return [
            Finding(
                "BLOCKER",
                key,
                f"template {facts.name} carries vGPU {', '.join(facts.vgpu_profiles)}: control-plane clones would "
                "keep it and, without a full memory reservation, not power on; use a template without vGPU here "
                "and name the vGPU one in vcenter.gpuTemplate",
            )
        ]
    return [Finding("OK", key, f"template {facts.name} carries no vGPU")]


def missing_gpu_template_finding(gpu_template: str | None) -> list[Finding]:
    """`vcenter.gpuTemplate` unset: workers would clone the control plane's template, which has no vGPU."""
    if gpu_template:
        return []
    return [
        Finding(
            "BLOCKER",
            "vcenter.gpuTemplate",
            "missing: GPU workers are cloned from a template that already carries their vGPU device "
            f"({TEMPLATE_BUILD}); without it their VgpuAttachment stops with an error after the "
            "first boot began",
        )
    ]
