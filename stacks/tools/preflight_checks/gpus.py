"""The template's firmware for the vGPU boards named, and GPUs other VMs already use.

Firmware rule: a BIOS template is accepted only when every vGPU profile is on a T4-class board.
VMware's list of VM settings for vGPU and passthrough (Frank Denneman, "vSphere ML Accelerator
Spectrum Deep Dive - ESXi Host BIOS, VM, and vCenter Settings", 2023) asks for EFI firmware, and
for `pciPassthru.use64bitMMIO` with host "Memory Mapping Above 4G", the latter two marked "not
applicable for NVIDIA T4": the T4 (256 MB BAR1) fits below 4 GB, which BIOS firmware can map; the
large-BAR boards (V100 and later: A100, A30, A40, A10, H100, L40, ...) need 64-bit MMIO, which
needs EFI. So BIOS is refused unless every profile is `grid_t4-*`: refusing a board that would
have worked costs one firmware switch on the template, accepting one that does not costs a VM
that never powers on.

GPUs in use: NVIDIA time-sliced vGPU puts vGPUs of one profile only on a physical GPU, at most
`framebuffer of the GPU / framebuffer of the profile` of them, and binds a GPU when the VM powers on.
So per host: the GPUs (`HostConfigInfo.graphicsInfo`) minus those the powered-on vGPUs of VMs not
ours hold (packed as tightly as NVIDIA's placement could), against what our workers pinned there need.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from components.vcenter.inventory_model import HostInfo, Inventory, VmInfo
from stacks.environment.model import Environment
from stacks.tools.preflight_checks.report import OurVms, Report

BIOS_BOARDS = frozenset({"t4"})
"""Boards whose vGPU profiles power on with BIOS firmware (see the module docstring)."""

_PROFILE = re.compile(r"^grid_(?P<board>[a-z0-9]+)(?:-[0-9]+)?-(?P<gb>[0-9]+)[a-z]$")


def profile_board(profile: str) -> str | None:
    match = _PROFILE.match(profile)
    return match["board"] if match else None


def profile_gb(profile: str) -> int | None:
    match = _PROFILE.match(profile)
    return int(match["gb"]) if match else None


def check_firmware(env: Environment, inv: Inventory, report: Report) -> None:
    matches = inv.vms.get(env.vcenter.template, [])
    if len(matches) != 1:
        return  # reported by the template check
    firmware = matches[0].firmware
    large_bar = sorted({p for p in env.gpu_workers.vgpu_profiles if profile_board(p) not in BIOS_BOARDS})
    key = ("vcenter", "template")
    if firmware == "efi":
        report.ok(key, f"template {env.vcenter.template!r} boots EFI")
    elif large_bar:
        report.blocker(
            key,
            f"template {env.vcenter.template!r} boots {firmware or 'unknown firmware'!r}, but vGPU profiles "
            f"{', '.join(large_bar)} are on large-BAR boards that need EFI (and 64-bit MMIO); "
            "convert the template to EFI, or use T4 profiles",
        )
    else:
        report.ok(key, f"template {env.vcenter.template!r} boots {firmware!r}: fine for T4 profiles only")


def _nvidia_gpu_gb(host: HostInfo) -> list[int]:
    return [g.memory_mb // 1024 for g in host.gpus if "nvidia" in (g.vendor_name + g.device_name).lower()]


def _free_slots(gpu_gb: list[int], others: list[str], profile: str) -> int:
    """How many more vGPUs of `profile` fit, after the others' vGPUs are placed (tightest packing)."""
    size = profile_gb(profile)
    if size is None or not gpu_gb:
        return 0
    per_gpu = min(gpu_gb) // size
    counts = Counter(others)
    used_gpus = 0
    spare = 0
    for other, count in counts.items():
        other_size = profile_gb(other) or min(gpu_gb)
        fit = max(1, min(gpu_gb) // other_size)
        used_gpus += math.ceil(count / fit)
        if other == profile:
            spare += math.ceil(count / fit) * fit - count
    return max(0, len(gpu_gb) - used_gpus) * per_gpu + spare


def check_gpus_in_use(env: Environment, inv: Inventory, report: Report, our_vms: OurVms) -> None:
    pinned: Counter[str] = Counter(
        node.host for node in env.gpu_workers.nodes if env.gpu_workers.placement == "vm-host-rules" and node.host
    )
    for index, spec in enumerate(env.hosts):
        host = inv.hosts.get(spec.name)
        if host is None:
            continue  # reported by the host checks
        theirs: list[VmInfo] = [
            vm
            for vm in inv.all_vms()
            if vm.host_moid == host.moid and vm.vgpu_profiles and vm.name not in our_vms and not vm.is_template
        ]
        if not theirs:
            continue
        listed = ", ".join(
            f"{vm.name} ({'+'.join(vm.vgpu_profiles)}{'' if vm.powered_on else ', powered off'})" for vm in theirs
        )
        path = ("hosts", index, "name")
        gpu_gb = _nvidia_gpu_gb(host)
        holding = [p for vm in theirs if vm.powered_on for p in vm.vgpu_profiles]
        short = []
        for profile, per_worker in Counter(env.gpu_workers.vgpu_profiles).items():
            need = per_worker * pinned[spec.name]
            free = _free_slots(gpu_gb, holding, profile)
            if need and gpu_gb and need > free:
                short.append(f"{need} x {profile} needed, {free} free")
        if short:
            report.blocker(
                path,
                f"GPUs of {spec.name!r} are taken by VMs not of this stack: {listed}; {len(gpu_gb)} GPU(s), "
                f"{'; '.join(short)}. Move or power off those VMs, or pin the workers elsewhere",
            )
        else:
            report.warn(path, f"other VMs on {spec.name!r} use vGPUs: {listed}; enough left for this stack's workers")
