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


# --- Which profiles exist: the boards and their C-series (compute) vGPU types -------------------
#
# NVIDIA Virtual GPU Software User Guide (vGPU 17/18), "Virtual GPU Types for Supported GPUs", the
# C-series tables of each board (docs.nvidia.com/vgpu/latest/grid-vgpu-user-guide/, and NVIDIA AI
# Enterprise's "NVIDIA vGPU (C-Series)" appendix for the same tables): a C-series type's name is
# `<BOARD>-<framebuffer GB>C`, a MIG-backed one `<BOARD>-<slices>-<framebuffer GB>C`; vSphere lists
# them lowercase with a `grid_` prefix (`grid_a100-40c`) and, for the boards that came with vGPU 16
# and later (Ada and Hopper: L4, L40, L40S, H100), with `nvidia_` (`nvidia_l40s-48c`). A name that
# is not in a board's table does not exist on any host (`nvidia_l40s-64c`, `nvidia_l40s-5c`), and
# the Ada and Hopper boards have no `grid_` names (`grid_l40s-48c`).
# The C-series of every board starts at 4 GB; the time-sliced sizes are the divisors of the board's
# framebuffer that NVIDIA offers (A100 40 GB: 40, 20, 10, 8, 5, 4).


@dataclass(frozen=True)
class Board:
    """One GPU board of the vGPU user guide: its name segment in profile names and its C-series types."""

    key: str
    """The board in the profile name: `l40s` in `nvidia_l40s-48c`."""
    product: str
    """How the board names itself (`HostGraphicsInfo.deviceName` carries it: `NVIDIA L40S`)."""
    framebuffer_gb: int
    prefixes: tuple[str, ...]
    """The prefixes vSphere lists its types with."""
    time_sliced: tuple[int, ...]
    """Framebuffer sizes (GB) of its time-sliced C-series types, largest first."""
    mig: tuple[str, ...] = ()
    """Its MIG-backed C-series types as `<slices>-<GB>` (`7-40` is A100-7-40C)."""

    def profiles(self) -> tuple[str, ...]:
        """Every C-series profile name of the board, as vSphere lists them (the first prefix)."""
        prefix = self.prefixes[0]
        return (
            *(f"{prefix}_{self.key}-{gb}c" for gb in self.time_sliced),
            *(f"{prefix}_{self.key}-{mig}c" for mig in self.mig),
        )

    def full_gpu_profile(self) -> str:
        """The time-sliced profile that takes one whole GPU (`grid_a100-40c`)."""
        return f"{self.prefixes[0]}_{self.key}-{self.time_sliced[0]}c"


_OLD = ("grid", "nvidia")
"""Turing and Ampere boards: `grid_` as vSphere has always listed them; `nvidia_` accepted too (vGPU
17 and later list every board with it, stacks/environment/fields.py)."""
_NEW = ("nvidia",)
_A100_MIG = ("7-40", "4-20", "3-20", "2-10", "1-5")
_A100D_MIG = ("7-80", "4-40", "3-40", "2-20", "1-10")
_H100_MIG = ("7-80", "4-40", "3-40", "2-20", "1-20", "1-10")

BOARDS: dict[str, Board] = {
    board.key: board
    for board in (
        Board("t4", "Tesla T4", 16, _OLD, (16, 8, 4)),
        Board("a2", "NVIDIA A2", 16, _OLD, (16, 8, 4)),
        Board("a10", "NVIDIA A10", 24, _OLD, (24, 12, 8, 6, 4)),
        Board("a16", "NVIDIA A16", 16, _OLD, (16, 8, 4)),
        Board("a30", "NVIDIA A30", 24, _OLD, (24, 12, 6, 4), ("4-24", "2-12", "1-6")),
        Board("a40", "NVIDIA A40", 48, _OLD, (48, 24, 16, 12, 8, 6, 4)),
        Board("a100", "NVIDIA A100 40GB", 40, _OLD, (40, 20, 10, 8, 5, 4), _A100_MIG),
        Board("a100d", "NVIDIA A100 80GB", 80, _OLD, (80, 40, 20, 16, 10, 8, 4), _A100D_MIG),
        Board("l4", "NVIDIA L4", 24, _NEW, (24, 12, 8, 6, 4)),
        Board("l40", "NVIDIA L40", 48, _NEW, (48, 24, 16, 12, 8, 6, 4)),
        Board("l40s", "NVIDIA L40S", 48, _NEW, (48, 24, 16, 12, 8, 6, 4)),
        Board("h100", "NVIDIA H100 PCIe", 80, _NEW, (80, 40, 20, 16, 10, 8, 4), _H100_MIG),
    )
}
"""The boards whose C-series types we know, by the board segment of their profile names."""

_COMPUTE_NAME = re.compile(r"^(?P<prefix>grid|nvidia)_(?P<board>[a-z0-9]+)-(?P<size>(?:\d+-)?\d+)c$")


def unknown_profile(name: str) -> str | None:
    """Why the C-series profile `name` exists on no host, or None when it exists. Names of other
    series are not judged here (a rule of their own refuses them for training)."""
    match = _COMPUTE_NAME.match(name)
    if match is None:
        return None
    board = BOARDS.get(match["board"])
    if board is None:
        return (
            f"board {match['board']!r} is not one this project knows the vGPU types of "
            f"(known: {', '.join(sorted(BOARDS))}; components/vsphere/vgpu/profiles.py BOARDS)"
        )
    if match["prefix"] not in board.prefixes:
        return f"{board.product} profiles are listed as {board.prefixes[0]}_{board.key}-..., not {match['prefix']}_"
    size = match["size"]
    sizes = {str(gb) for gb in board.time_sliced} | set(board.mig)
    if size not in sizes:
        return f"{board.product} ({board.framebuffer_gb} GB) has no such C-series type; its types: {', '.join(board.profiles())}"
    return None


def board_of_gpu(device_name: str, memory_mb: int) -> Board | None:
    """The board a host's GPU is, from `HostGraphicsInfo.deviceName` (`NVIDIA L40S`, `Tesla T4`,
    `NVIDIA A100-PCIE-40GB`) and `memorySizeInKB`, or None: the board's name as a word of the device
    name (so an L40 is no L40S); the A100's two sizes told apart by framebuffer."""
    words = set(re.split(r"[^a-z0-9]+", device_name.casefold()))
    found = [b for b in BOARDS.values() if b.key in words]
    if not found:
        return None
    if found[0].key == "a100":
        return BOARDS["a100d" if memory_mb >= 60 * 1024 else "a100"]
    return found[0]
