"""Preflight against the simulator: the GPU workers' template (`vcenter.gpuTemplate`) and the GPU
hosts' *active* graphics type.

The templates are planted by conftest (a T4 one with its snapshot, a BIOS A100 one without 64-bit
MMIO, an EFI A100 one with it); the graphics are arranged as an admin would, through the host's
graphics manager and its xorg service (tests/components/vsphere/graphics_helpers.py, vcsim/graphics.go).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from tests.components.vsphere.graphics_helpers import set_active_graphics

from .conftest import (
    A100_BIOS_TEMPLATE,
    A100_TEMPLATE,
    BARE_TEMPLATE,
    GPU_TEMPLATE,
    GPU_TEMPLATE_8C,
    OLD_TOOLKIT_TEMPLATE,
    TEMPLATE,
    Planted,
    _find,
)
from .test_preflight_vcsim import BASE, ENV, blockers

pytestmark = pytest.mark.vcsim

Run = Callable[..., tuple[int, list[str]]]


def _with(**vcenter: Any) -> dict[str, Any]:
    env = copy.deepcopy(BASE)
    for key, value in vcenter.items():
        if value is None:
            env["vcenter"].pop(key, None)
        else:
            env["vcenter"][key] = value
    return env


def test_gpu_template_must_exist_and_carry_the_snapshot(preflight: Run) -> None:
    code, lines = preflight(_with(gpuTemplate="no-such-gpu-template"))
    assert code == 1
    assert (
        f"BLOCKER {ENV}.vcenter.gpuTemplate: GPU template 'no-such-gpu-template' not found; build it (templates/README.md: "
        "the checklist and a Packer build of both templates)"
    ) in lines

    _, lines = preflight(_with(gpuTemplate=BARE_TEMPLATE))
    assert (
        f"BLOCKER {ENV}.vcenter.gpuTemplate: GPU template '{BARE_TEMPLATE}' has no snapshot; linked clones need "
        "exactly one, named 'base' (take one, or set vm.linkedClone: false; templates/README.md: the checklist and "
        "a Packer build of both templates)"
    ) in lines
    # ... and the vGPU it lacks, judged by components.vsphere.gpu_template.
    assert any(
        line.startswith(
            f"BLOCKER {ENV}.vcenter.gpuTemplate: template {BARE_TEMPLATE} carries no vGPU device, "
            "gpuWorkers.vgpuProfiles asks for grid_t4-16c"
        )
        for line in lines
    ), "\n".join(lines)


def test_missing_gpu_template_key_is_a_blocker(preflight: Run) -> None:
    code, lines = preflight(_with(gpuTemplate=None))
    assert code == 1
    assert any(
        line.startswith(f"BLOCKER {ENV}.vcenter.gpuTemplate: missing: GPU workers are cloned from a template")
        for line in lines
    ), "\n".join(lines)


def test_control_plane_template_must_carry_no_vgpu(preflight: Run) -> None:
    code, lines = preflight(_with(template=GPU_TEMPLATE_8C))
    assert code == 1
    assert any(
        line.startswith(f"BLOCKER {ENV}.vcenter.template: template {GPU_TEMPLATE_8C} carries vGPU grid_t4-8c")
        for line in lines
    ), "\n".join(lines)


def test_large_bar_gpu_template_needs_efi_and_64bit_mmio(preflight: Run) -> None:
    a100 = _with(gpuTemplate=A100_BIOS_TEMPLATE)
    a100["gpuWorkers"]["vgpuProfiles"] = ["grid_a100-40c"]
    a100["vm"]["linkedClone"] = False
    code, lines = preflight(a100)
    assert code == 1
    assert (
        f"BLOCKER {ENV}.vcenter.gpuTemplate: template {A100_BIOS_TEMPLATE}: vGPU grid_a100-40c needs 64-bit MMIO "
        "at power-on (VMware KB 2142307), vCenter will refuse to start the workers: firmware is bios, not efi "
        "(reinstall the guest with EFI); pciPassthru.use64bitMMIO is not TRUE; pciPassthru.64bitMMIOSizeGB is "
        "unset, needs 128"
    ) in lines
    # The EFI template with its MMIO settings passes: firmware and extraConfig read from vCenter.
    a100["vcenter"]["gpuTemplate"] = A100_TEMPLATE
    _, lines = preflight(a100)
    assert f"OK      {ENV}.vcenter.gpuTemplate: template {A100_TEMPLATE} carries grid_a100-40c" in lines
    assert not [line for line in blockers(lines) if ".vcenter." in line], "\n".join(lines)
    # A T4 worker is fine on a BIOS template: one rule (vgpu_profiles.SMALL_BAR_BOARDS) for both.
    _, lines = preflight(_with(template=TEMPLATE))
    assert f"OK      {ENV}.vcenter.gpuTemplate: template {GPU_TEMPLATE} carries grid_t4-16c" in lines


def test_gpu_template_with_a_toolkit_before_the_cve_fix_is_a_blocker(preflight: Run) -> None:
    """NVIDIA Container Toolkit < 1.17.8 lets a container image reach host root (CVE-2025-23266):
    preflight reads the version the template's build recorded in its extraConfig."""
    code, lines = preflight(_with(gpuTemplate=OLD_TOOLKIT_TEMPLATE))
    assert code == 1
    assert (
        f"BLOCKER {ENV}.vcenter.gpuTemplate: template {OLD_TOOLKIT_TEMPLATE} has NVIDIA Container Toolkit 1.17.7, "
        "older than 1.17.8: a container image can reach host root through its hook (CVE-2025-23266), and the "
        "bootstrap refuses it on every GPU worker; rebuild the template with nvidia_container_toolkit_version "
        "1.17.8 or later (templates/README.md)"
    ) in lines, "\n".join(lines)
    _, lines = preflight(_with(gpuTemplate=GPU_TEMPLATE))
    assert (
        f"OK      {ENV}.vcenter.gpuTemplate: template {GPU_TEMPLATE} has NVIDIA Container Toolkit 1.18.0 "
        "(at least 1.17.8)"
    ) in lines
    # The GPU Operator brings its own toolkit: the template's is not the one containers use.
    operator = _with(gpuTemplate=OLD_TOOLKIT_TEMPLATE)
    operator["gpu"] = {
        "mode": "gpu-operator",
        "gpuOperator": {"driverRepository": "registry.example/nvidia", "driverVersion": "550.127.05"},
    }
    _, lines = preflight(operator)
    assert not [line for line in lines if "Container Toolkit" in line], "\n".join(lines)


GRAPHICS_HOST = "DC0_C0_H0"
"""hosts[0] of BASE; no VM holds its GPU."""


@pytest.fixture
def host(planted: Planted) -> Iterator[Any]:
    """GRAPHICS_HOST, put back to Shared Direct (configured and active) afterwards."""
    sim = planted.sim
    si = SmartConnect(protocol="http", host="127.0.0.1", port=sim.parts.port, user=sim.user, pwd=sim.password)
    try:
        found = _find(si, vim.HostSystem, GRAPHICS_HOST)
        yield found
        set_active_graphics(found, "sharedDirect")
    finally:
        Disconnect(si)


def _unmanaged(manage: bool) -> dict[str, Any]:
    env = copy.deepcopy(BASE)
    env["hostGraphics"] = {"manage": manage}
    return env


def test_configured_but_not_active_shared_direct_blocks_a_check_only_stack(preflight: Run, host: Any) -> None:
    # The admin set Shared Direct but never restarted xorg: the GPU still runs in 'shared' mode,
    # and no vGPU VM would power on.
    set_active_graphics(host, "shared")
    host.configManager.graphicsManager.UpdateGraphicsConfig(
        config=vim.host.GraphicsConfig(
            hostDefaultGraphicsType="sharedDirect", sharedPassthruAssignmentPolicy="performance"
        )
    )
    code, lines = preflight(_unmanaged(False))
    assert code == 1
    assert (
        f"BLOCKER {ENV}.hostGraphics.manage: host '{GRAPHICS_HOST}': the NVIDIA GPU runs in 'shared' mode now, not "
        "'sharedDirect' (vGPU needs it); 'sharedDirect' is configured but takes effect only when xorg restarts with "
        "the GPU's VMs off. Switch it (Configure > Hardware > Graphics > Host Graphics: Shared Direct, then restart "
        "xorg with the GPU's VMs powered off) or set hostGraphics.manage: true"
    ) in lines
    assert (
        f"OK      {ENV}.hostGraphics.manage: host 'DC0_C0_H1': the NVIDIA GPU runs in Shared Direct mode (vGPU)"
        in lines
    )


def test_managed_graphics_say_the_program_will_switch_and_restart_xorg(preflight: Run, host: Any) -> None:
    set_active_graphics(host, "shared")
    code, lines = preflight(_unmanaged(True))
    assert code == 0, "\n".join(lines)
    assert (
        f"WARN    {ENV}.hostGraphics.manage: host '{GRAPHICS_HOST}': the NVIDIA GPU runs in 'shared' mode now, not "
        "'sharedDirect' (vGPU needs it); the configured default is 'shared'. The program will set Shared Direct "
        "and restart the host's xorg service (no VM holds the GPU now; keep it that way until `pulumi up` has run)"
    ) in lines
