"""HostGraphicsMode against the vCenter simulator (graphics manager added by our harness).

The harness keeps the configured default graphics type apart from the active one, as ESXi does:
`UpdateGraphicsConfig` alone changes nothing a vGPU VM can use; a restart of the host's `xorg`
service with no VM holding the GPU makes it active (vcsim/graphics.go).
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.tasks import wait_for_task
from components.vsphere.host_graphics import resource as host_graphics
from components.vsphere.host_graphics.resource import HostGraphicsModeProvider
from components.vsphere.provider_base import RetryPolicy
from tests.components.vsphere.graphics_helpers import set_active_graphics

pytestmark = pytest.mark.vcsim

FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.1, max_delay=0.3, max_total=5)


def _graphics(find: Callable[[Any, str], Any], name: str) -> tuple[str, str]:
    config = find(vim.HostSystem, name).configManager.graphicsManager.graphicsConfig
    return config.hostDefaultGraphicsType, config.sharedPassthruAssignmentPolicy


def _active(find: Callable[[Any, str], Any], name: str) -> str:
    """The NVIDIA device's graphics type now (graphicsInfo after a refresh), not the configured one."""
    manager = find(vim.HostSystem, name).configManager.graphicsManager
    manager.RefreshGraphicsManager()  # graphicsInfo shows the last refresh (vcsim/graphics.go)
    infos = manager.graphicsInfo
    return next(i.graphicsType for i in infos if "NVIDIA" in i.vendorName)


def _set_graphics(find: Callable[[Any, str], Any], name: str, kind: str, policy: str) -> None:
    """Configure the type and restart Xorg: the host runs in that mode afterwards."""
    set_active_graphics(find(vim.HostSystem, name), kind, policy)


def _configure_only(find: Callable[[Any, str], Any], name: str, kind: str, policy: str = "performance") -> None:
    """What vCenter's dialog does without the Xorg restart VMware's procedure asks for next."""
    find(vim.HostSystem, name).configManager.graphicsManager.UpdateGraphicsConfig(
        config=vim.host.GraphicsConfig(hostDefaultGraphicsType=kind, sharedPassthruAssignmentPolicy=policy)
    )


@pytest.fixture
def provider(configured: Callable[..., Any]) -> HostGraphicsModeProvider:
    return configured(HostGraphicsModeProvider(retry=FAST_RETRY))


def _inputs(provider: HostGraphicsModeProvider, host_name: str, manage: bool) -> dict[str, Any]:
    checked = provider.check({}, {"host_name": host_name, "manage": manage})
    assert checked.failures == []
    return checked.inputs


def test_manage_sets_shared_direct_and_delete_restores(
    provider: HostGraphicsModeProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    _set_graphics(find, host_name, "shared", "consolidation")
    inputs = _inputs(provider, host_name, manage=True)

    created = provider.create(inputs)

    assert _graphics(find, host_name) == ("sharedDirect", "performance")
    assert created.outs["previous_default_graphics_type"] == "shared"
    assert created.outs["previous_assignment_policy"] == "consolidation"
    read = provider.read(created.id, created.outs)
    assert read.outs == created.outs
    assert provider.diff(created.id, read.outs, inputs).changes is False

    provider.delete(created.id, read.outs)

    assert _graphics(find, host_name) == ("shared", "consolidation")


def test_manage_is_idempotent(
    provider: HostGraphicsModeProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    inputs = _inputs(provider, host_name, manage=True)
    provider.create(inputs)
    again = provider.create(inputs)
    assert _graphics(find, host_name) == ("sharedDirect", "performance")
    assert again.outs["default_graphics_type"] == "sharedDirect"


def test_drift_back_to_shared_is_detected_and_repaired(
    provider: HostGraphicsModeProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    inputs = _inputs(provider, host_name, manage=True)
    created = provider.create(inputs)
    _set_graphics(find, host_name, "shared", "performance")  # an admin switches it back

    refreshed = provider.read(created.id, created.outs)
    assert refreshed.outs["default_graphics_type"] == "shared"
    assert provider.diff(created.id, refreshed.outs, inputs).changes is True

    provider.update(created.id, refreshed.outs, inputs)
    assert _graphics(find, host_name) == ("sharedDirect", "performance")


def test_verify_only_fails_early_in_check_naming_host_and_fix(
    provider: HostGraphicsModeProvider, host_name: str
) -> None:
    result = provider.check({}, {"host_name": host_name, "manage": False})

    assert [f.property for f in result.failures] == ["manage"]
    reason = result.failures[0].reason
    assert f"host {host_name}" in reason
    assert "'shared'" in reason
    assert "hostGraphics.manage: true" in reason
    assert "Host > Configure > Hardware > Graphics" in reason


def test_verify_only_create_fails_and_changes_nothing(
    provider: HostGraphicsModeProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    with pytest.raises(VsphereError) as info:
        provider.create({"host_name": host_name, "manage": False})

    assert f"host {host_name}" in str(info.value)
    assert "hostGraphics.manage: true" in str(info.value)
    assert _graphics(find, host_name) == ("shared", "performance")


def test_verify_only_passes_on_a_shared_direct_host_and_delete_keeps_it(
    provider: HostGraphicsModeProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    _set_graphics(find, host_name, "sharedDirect", "consolidation")
    inputs = _inputs(provider, host_name, manage=False)

    created = provider.create(inputs)
    provider.delete(created.id, created.outs)

    assert _graphics(find, host_name) == ("sharedDirect", "consolidation")


def test_check_reports_an_unknown_host(provider: HostGraphicsModeProvider) -> None:
    result = provider.check({}, {"host_name": "esx-typo-3", "manage": False})
    assert [(f.property, f.reason) for f in result.failures] == [
        ("host_name", "host 'esx-typo-3' not found in vCenter")
    ]


def test_check_does_not_fail_when_vcenter_is_unreachable(configured: Callable[..., Any]) -> None:
    # A preview of a new stack from a machine that cannot reach vCenter: no failure, and fast.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    provider = configured(HostGraphicsModeProvider(), port=closed_port)

    start = time.monotonic()
    result = provider.check({}, {"host_name": "DC0_C0_H0", "manage": False})

    assert result.failures == []
    assert time.monotonic() - start < 5


def test_missing_host_fails_create_with_its_name(provider: HostGraphicsModeProvider) -> None:
    with pytest.raises(VsphereError, match=r"ESXi host 'esx-gone-1' not found"):
        provider.create({"host_name": "esx-gone-1", "manage": True})


# ---------------------------------------------------------------------------------------------
# Configured versus active (issue 14, defect 2) and what the harness refuses


@pytest.fixture
def vm_on_host(si: Any, host_name: str, find: Callable[[Any, str], Any], request: Any) -> Iterator[Any]:
    """A powered-off clone on `host_name`, destroyed after the test (the simulator puts a clone on
    its source's host, so the source is the inventory's VM on that host)."""
    template = next(vm for vm in find(vim.HostSystem, host_name).vm if vm.name.startswith("DC0_C0_RP0_VM"))
    name = f"gfx-{request.node.name[:30]}-{time.monotonic_ns() % 100000}"
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=False)
    wait_for_task(template.CloneVM_Task(folder=template.parent, name=name, spec=spec))
    vm = find(vim.VirtualMachine, name)
    yield vm
    with contextlib.suppress(Exception):
        if vm.runtime.powerState == "poweredOn":
            wait_for_task(vm.PowerOffVM_Task())
        wait_for_task(vm.Destroy_Task())


def _add_vgpu(vm: Any, profile: str = "grid_t4-16c") -> None:
    device = vim.vm.device.VirtualPCIPassthrough(
        key=-1, backing=vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=profile)
    )
    change = vim.vm.device.VirtualDeviceSpec(operation="add", device=device)
    # A vGPU VM needs all its memory reserved before it powers on (the harness refuses it
    # otherwise, as vCenter does), so the graphics rule is the one a test meets.
    spec = vim.vm.ConfigSpec(deviceChange=[change], memoryReservationLockedToMax=True)
    wait_for_task(vm.ReconfigVM_Task(spec=spec))


def _enable_3d(vm: Any) -> None:
    """A vSGA VM: its 3D video card renders on the host GPU in shared mode and holds it."""
    card = next(d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualVideoCard))
    card.enable3DSupport = True
    card.use3dRenderer = "hardware"
    change = vim.vm.device.VirtualDeviceSpec(operation="edit", device=card)
    wait_for_task(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[change])))


def test_harness_configured_shared_direct_is_not_active_until_xorg_restarts(
    host_name: str, find: Callable[[Any, str], Any], vm_on_host: Any
) -> None:
    _add_vgpu(vm_on_host)
    _configure_only(find, host_name, "sharedDirect")

    assert _graphics(find, host_name) == ("sharedDirect", "performance")
    assert _active(find, host_name) == "shared"
    with pytest.raises(VsphereError) as refused:
        wait_for_task(vm_on_host.PowerOnVM_Task())
    assert isinstance(refused.value.fault, vim.fault.InsufficientGraphicsResourcesFault)

    find(vim.HostSystem, host_name).configManager.serviceSystem.RestartService(id="xorg")

    assert _active(find, host_name) == "sharedDirect"
    wait_for_task(vm_on_host.PowerOnVM_Task())
    holders = find(vim.HostSystem, host_name).configManager.graphicsManager.graphicsInfo[0].vm
    assert [vm.name for vm in holders] == [vm_on_host.name]


def test_create_restarts_xorg_and_reports_the_active_type(
    provider: HostGraphicsModeProvider, host_name: str, find: Callable[[Any, str], Any], vm_on_host: Any
) -> None:
    created = provider.create(_inputs(provider, host_name, manage=True))

    assert _active(find, host_name) == "sharedDirect"
    assert created.outs["active_graphics_type"] == "sharedDirect"
    assert created.outs["default_graphics_type"] == "sharedDirect"
    _add_vgpu(vm_on_host)
    wait_for_task(vm_on_host.PowerOnVM_Task())  # what the worker needs from this resource


def test_configured_but_inactive_is_drift_and_update_makes_it_active(
    provider: HostGraphicsModeProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    inputs = _inputs(provider, host_name, manage=True)
    created = provider.create(inputs)
    # An admin switches to shared and restarts Xorg, then sets Shared Direct back but forgets it.
    _set_graphics(find, host_name, "shared", "performance")
    _configure_only(find, host_name, "sharedDirect")

    refreshed = provider.read(created.id, created.outs)
    assert (refreshed.outs["default_graphics_type"], refreshed.outs["active_graphics_type"]) == (
        "sharedDirect",
        "shared",
    )
    assert provider.diff(created.id, refreshed.outs, inputs).changes is True

    updated = provider.update(created.id, refreshed.outs, inputs)
    assert updated.outs["active_graphics_type"] == "sharedDirect"
    assert _active(find, host_name) == "sharedDirect"


def test_gpu_held_by_running_vms_fails_clearly_naming_them(
    provider: HostGraphicsModeProvider, host_name: str, find: Callable[[Any, str], Any], vm_on_host: Any
) -> None:
    _enable_3d(vm_on_host)
    wait_for_task(vm_on_host.PowerOnVM_Task())

    with pytest.raises(VsphereError) as info:
        provider.create(_inputs(provider, host_name, manage=True))

    message = str(info.value)
    assert f"host {host_name}" in message
    assert "still runs in 'shared' mode" in message
    assert vm_on_host.name in message
    assert "power those VMs off" in message
    assert _active(find, host_name) == "shared"

    # With the VM off, the same create converges.
    wait_for_task(vm_on_host.PowerOffVM_Task())
    assert provider.create(_inputs(provider, host_name, manage=True)).outs["active_graphics_type"] == "sharedDirect"


def test_verify_only_fails_when_shared_direct_is_configured_but_not_active(
    provider: HostGraphicsModeProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    _configure_only(find, host_name, "sharedDirect")

    result = provider.check({}, {"host_name": host_name, "manage": False})

    assert [f.property for f in result.failures] == ["manage"]
    assert "configured as 'sharedDirect'" in result.failures[0].reason
    assert "Xorg restarts" in result.failures[0].reason
    with pytest.raises(VsphereError):
        provider.create({"host_name": host_name, "manage": False})


# ---------------------------------------------------------------------------------------------
# Lost state (issue 14, defect 9)


def test_create_after_lost_state_keeps_the_original_previous_mode(
    provider: HostGraphicsModeProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    _set_graphics(find, host_name, "shared", "consolidation")
    inputs = _inputs(provider, host_name, manage=True)
    provider.create(inputs)  # its state is then lost (an interrupted up, a re-created stack)

    again = provider.create(inputs)

    assert again.outs["previous_default_graphics_type"] == "shared"
    assert again.outs["previous_assignment_policy"] == "consolidation"
    provider.delete(again.id, again.outs)
    assert _graphics(find, host_name) == ("shared", "consolidation")
    assert _active(find, host_name) == "shared"


def test_shared_direct_set_by_the_admin_is_kept_on_delete(
    provider: HostGraphicsModeProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    _set_graphics(find, host_name, "sharedDirect", "performance")
    inputs = _inputs(provider, host_name, manage=True)

    created = provider.create(inputs)
    assert created.outs["previous_default_graphics_type"] == "sharedDirect"
    provider.delete(created.id, created.outs)

    assert _graphics(find, host_name) == ("sharedDirect", "performance")


# ---------------------------------------------------------------------------------------------
# No Xorg restart while running VMs hold the GPU (VMware's procedure: power them off first)


def _stop_xorg(find: Callable[[Any, str], Any], name: str) -> None:
    """Stop the host's xorg service: the harness's RestartService starts it again (running=True,
    vcsim/host_services.go), so a stopped service afterwards shows that nothing restarted it.
    The host fixture's reset restarts it."""
    find(vim.HostSystem, name).configManager.serviceSystem.StopService(id="xorg")


def _xorg_running(find: Callable[[Any, str], Any], name: str) -> bool:
    services = find(vim.HostSystem, name).configManager.serviceSystem.serviceInfo.service
    return bool(next(s.running for s in services if s.key == "xorg"))


@pytest.mark.parametrize("step", ["create", "update"])
def test_gpu_held_by_running_vms_fails_before_any_xorg_restart(
    provider: HostGraphicsModeProvider,
    host_name: str,
    find: Callable[[Any, str], Any],
    vm_on_host: Any,
    step: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inputs = _inputs(provider, host_name, manage=True)
    olds: dict[str, Any] = {}
    if step == "update":
        olds = provider.create(inputs).outs
        _set_graphics(find, host_name, "shared", "performance")  # an admin switches it back
        olds = provider.read(f"graphics:{host_name}", olds).outs
    _enable_3d(vm_on_host)  # a vSGA VM: it holds the GPU in shared mode
    wait_for_task(vm_on_host.PowerOnVM_Task())
    _stop_xorg(find, host_name)
    restarts: list[str] = []
    real_restart = host_graphics.restart_xorg
    monkeypatch.setattr(host_graphics, "restart_xorg", lambda host: restarts.append(host.name) or real_restart(host))

    with pytest.raises(VsphereError) as info:
        if step == "create":
            provider.create(inputs)
        else:
            provider.update(f"graphics:{host_name}", olds, inputs)

    message = str(info.value)
    assert f"host {host_name}" in message
    assert vm_on_host.name in message
    assert "power those VMs off" in message
    assert restarts == []
    assert _xorg_running(find, host_name) is False
    assert _active(find, host_name) == "shared"


def test_delete_does_not_restart_xorg_while_running_vms_hold_the_gpu(
    provider: HostGraphicsModeProvider,
    host_name: str,
    find: Callable[[Any, str], Any],
    vm_on_host: Any,
) -> None:
    created = provider.create(_inputs(provider, host_name, manage=True))
    _add_vgpu(vm_on_host)
    wait_for_task(vm_on_host.PowerOnVM_Task())
    _stop_xorg(find, host_name)

    provider.delete(created.id, created.outs)

    # The previous mode is configured again, to take effect at the next Xorg restart or reboot.
    assert _graphics(find, host_name) == ("shared", "performance")
    assert _xorg_running(find, host_name) is False
    assert _active(find, host_name) == "sharedDirect"
