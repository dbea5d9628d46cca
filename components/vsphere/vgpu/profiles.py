"""What a vGPU profile name says about the VM that carries it (pure functions, no vCenter).

NVIDIA names vGPU profiles `grid_<board>-[<MIG slices>-]<framebuffer GB><series>`:
`grid_t4-16c` is a 16 GB C-series (compute) vGPU on a Tesla T4, `grid_a100-3-20c` a 20 GB
MIG-backed one on an A100.

Large BARs: a vGPU on a board with a large framebuffer BAR (A100, A40, A30, A10, H100, L40, ...)
needs 64-bit MMIO in the VM: `pciPassthru.use64bitMMIO = TRUE`, `pciPassthru.64bitMMIOSizeGB`
large enough for the framebuffer, and EFI firmware (VMware KB 2142307, "VMware vSphere
VMDirectPath I/O: Requirements for Platforms and Devices"; NVIDIA Virtual GPU Software User
Guide, "Requirements for Using vGPU on GPUs Requiring 64 GB or More of MMIO Space with
Large-Memory VMs"). Without them vCenter refuses the power-on. VMware's sizing rule is the
total GPU memory of the VM rounded up to the next power of two; we size for twice the vGPU
framebuffer total, rounded up (the common practice in VMware's and NVIDIA's examples: A100
40 GB -> 128), which also leaves room for the BARs' alignment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Boards released since vGPU 17 are listed with an `nvidia_` prefix (nvidia_l40s-48c): same shape.
PROFILE_PATTERN = re.compile(r"^(?:grid|nvidia)_(?P<board>[a-z0-9]+)-(?:\d+-)?(?P<framebuffer>\d+)[a-z]$")

SMALL_BAR_BOARDS = frozenset({"t4", "m10", "m60"})
"""NVIDIA vGPU boards whose BARs fit below 4 GB: no 64-bit MMIO and no EFI needed; every other
board needs both. The one definition of that rule (the provider's extraConfig, the GPU template
checks, preflight). VMware's list of VM settings for vGPU (Frank Denneman, "vSphere ML
Accelerator Spectrum Deep Dive - ESXi Host BIOS, VM, and vCenter Settings", 2023) marks EFI and
64-bit MMIO "not applicable for NVIDIA T4" (256 MB BAR1); the Maxwell M10 and M60 are counted
with it here as well (they predate the large-BAR boards)."""

USE_64BIT_MMIO = "pciPassthru.use64bitMMIO"
MMIO_SIZE_GB = "pciPassthru.64bitMMIOSizeGB"


@dataclass(frozen=True)
class VgpuProfile:
    name: str
    board: str
    framebuffer_gb: int

    @property
    def large_bar(self) -> bool:
        return self.board not in SMALL_BAR_BOARDS


def parse_profile(name: str) -> VgpuProfile:
    """The board and framebuffer of a profile name; ValueError naming it when malformed."""
    match = PROFILE_PATTERN.match(name)
    if match is None:
        raise ValueError(f"vGPU profile {name!r} is not of the form grid_<board>-<framebuffer GB><series>")
    return VgpuProfile(name=name, board=match["board"], framebuffer_gb=int(match["framebuffer"]))


def needs_64bit_mmio(profiles: Sequence[str]) -> bool:
    return any(parse_profile(p).large_bar for p in profiles)


def mmio_size_gb(profiles: Sequence[str]) -> int:
    """`pciPassthru.64bitMMIOSizeGB` for these vGPUs: twice their framebuffer total, rounded up to
    a power of two (A100 40 GB: 128; two of them: 256)."""
    total = sum(parse_profile(p).framebuffer_gb for p in profiles)
    return 1 << max(0, (2 * total - 1).bit_length())


def vgpu_extra_config(profiles: Sequence[str]) -> dict[str, str]:
    """The VM extraConfig the vGPUs need before the VM powers on; empty for small-BAR boards."""
    if not needs_64bit_mmio(profiles):
        return {}
    return {USE_64BIT_MMIO: "TRUE", MMIO_SIZE_GB: str(mmio_size_gb(profiles))}
