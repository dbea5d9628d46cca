"""GPUs other VMs already use.

(The template's firmware and 64-bit MMIO for large-BAR boards: `templates`, with the rule of
`components.vsphere.vgpu.profiles`.)

GPUs in use: NVIDIA time-sliced vGPU puts vGPUs of one profile only on a physical GPU, at most
`framebuffer of the GPU / framebuffer of the profile` of them, and binds a GPU when the VM powers on.
So per host: the GPUs (`HostConfigInfo.graphicsInfo`) minus those the powered-on vGPUs of VMs not
ours hold (packed as tightly as NVIDIA's placement could), against what our workers pinned there need.
"""

from __future__ import annotations

import math
from collections import Counter

from components.vcenter.inventory_model import HostInfo, Inventory, VmInfo
from components.vsphere.vgpu.profiles import PROFILE_PATTERN
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.report import OurVms, Report


def profile_gb(profile: str) -> int | None:
    match = PROFILE_PATTERN.match(profile)
    return int(match["framebuffer"]) if match else None


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
