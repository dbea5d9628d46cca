"""The boards' C-series tables (components/vsphere/vgpu/profiles.py BOARDS): what exists, and
which board a host's GPU is."""

from __future__ import annotations

import pytest

from components.vsphere.vgpu.profiles import BOARDS, board_of_gpu, parse_profile, unknown_profile


@pytest.mark.parametrize(
    "name",
    [
        "grid_t4-16c",
        "grid_t4-4c",
        "grid_a100-40c",
        "grid_a100-3-20c",
        "grid_a100d-80c",
        "nvidia_l40s-48c",
        "nvidia_l40s-24c",
        "nvidia_l4-24c",
        "nvidia_h100-1-10c",
        "grid_a40-48c",
        "grid_a30-1-6c",
    ],
)
def test_profiles_in_the_user_guide_exist(name: str) -> None:
    assert unknown_profile(name) is None


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("nvidia_l40s-64c", "has no such C-series type"),
        ("nvidia_l40s-96c", "has no such C-series type"),
        ("nvidia_l40s-5c", "has no such C-series type"),
        ("grid_l40s-48c", "not grid_"),
        ("grid_t4-2c", "has no such C-series type"),
        ("grid_a100-7-80c", "has no such C-series type"),
        ("grid_v100-16c", "not one this project knows"),
    ],
)
def test_names_no_board_has_are_refused(name: str, why: str) -> None:
    assert why in (unknown_profile(name) or "")


def test_other_series_are_not_judged_here() -> None:
    assert unknown_profile("grid_t4-16q") is None


def test_every_listed_profile_parses_and_fits_its_board() -> None:
    for board in BOARDS.values():
        assert board.full_gpu_profile() == board.profiles()[0]
        for name in board.profiles():
            assert unknown_profile(name) is None
            profile = parse_profile(name)
            assert profile.board == board.key
            assert profile.framebuffer_gb <= board.framebuffer_gb


@pytest.mark.parametrize(
    ("device", "memory_mb", "board"),
    [
        ("NVIDIA L40S", 46068, "l40s"),
        ("NVIDIA L40", 46068, "l40"),
        ("Tesla T4", 15360, "t4"),
        ("NVIDIA A100-PCIE-40GB", 40960, "a100"),
        ("NVIDIA A100 80GB PCIe", 81920, "a100d"),
        ("Matrox G200eR2", 16, None),
    ],
)
def test_board_of_a_hosts_gpu(device: str, memory_mb: int, board: str | None) -> None:
    found = board_of_gpu(device, memory_mb)
    assert (found.key if found else None) == board
