"""Host graphics after an Xorg restart: graphicsInfo shows it only after RefreshGraphicsManager,
and a per-device override (graphicsConfig.deviceType) can keep the GPU out of Shared Direct
(defect 4; the harness side is vcsim/graphics.go)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vsphere.host_graphics.ops import wait_until_active
from components.vsphere.host_graphics.resource import HostGraphicsModeProvider
from components.vsphere.provider_base import RetryPolicy
from tests.components.vsphere.graphics_helpers import set_active_graphics

NO_RETRY = RetryPolicy(attempts=1, max_total=10)
T4_PCI_ID = "0000:3b:00.0"  # the harness's one GPU per host


def _shown_type(host: Any) -> str:
    """graphicsInfo as a client reads it, without refreshing."""
    return str(host.configManager.graphicsManager.graphicsInfo[0].graphicsType)


def _override(host: Any, graphics_type: str) -> None:
    """Set (or with "", clear: the harness takes an empty type for no override) the T4's type."""
    host.configManager.graphicsManager.UpdateGraphicsConfig(
        config=vim.host.GraphicsConfig(
            hostDefaultGraphicsType=host.configManager.graphicsManager.graphicsConfig.hostDefaultGraphicsType,
            sharedPassthruAssignmentPolicy="performance",
            deviceType=[vim.host.GraphicsConfig.DeviceType(deviceId=T4_PCI_ID, graphicsType=graphics_type)],
        )
    )


@pytest.fixture
def host(host_name: str, find: Callable[[Any, str], Any]) -> Iterator[Any]:
    found = find(vim.HostSystem, host_name)
    yield found
    _override(found, "")
    set_active_graphics(found, "shared")


@pytest.fixture
def provider(configured: Callable[..., Any]) -> HostGraphicsModeProvider:
    return configured(HostGraphicsModeProvider(retry=NO_RETRY, active_timeout=1.0, active_poll=0.2))


@pytest.mark.vcsim
def test_harness_shows_the_restarted_type_only_after_a_refresh(host: Any) -> None:
    manager = host.configManager.graphicsManager
    manager.UpdateGraphicsConfig(
        config=vim.host.GraphicsConfig(
            hostDefaultGraphicsType="sharedDirect", sharedPassthruAssignmentPolicy="performance"
        )
    )
    host.configManager.serviceSystem.RestartService(id="xorg")

    assert _shown_type(host) == "shared"
    assert host.config.graphicsInfo[0].graphicsType == "shared"
    manager.RefreshGraphicsManager()
    assert _shown_type(host) == "sharedDirect"
    assert host.config.graphicsInfo[0].graphicsType == "sharedDirect"


@pytest.mark.vcsim
def test_create_refreshes_after_the_xorg_restart_and_reports_shared_direct(
    provider: HostGraphicsModeProvider, host: Any
) -> None:
    created = provider.create({"host_name": host.name, "manage": True, "assignment_policy": "performance"})

    assert created.outs["active_graphics_type"] == "sharedDirect"
    provider.delete(created.id, created.outs)


@pytest.mark.vcsim
def test_a_device_override_to_shared_fails_naming_the_override_and_device(
    provider: HostGraphicsModeProvider, host: Any
) -> None:
    _override(host, "shared")

    with pytest.raises(VsphereError) as failed:
        provider.create({"host_name": host.name, "manage": True, "assignment_policy": "performance"})

    message = str(failed.value)
    assert "graphicsConfig.deviceType" in message
    assert T4_PCI_ID in message and "NVIDIA Tesla T4" in message
    assert "remove the override" in message
    # Nothing changed: no default we could set reaches the overridden device.
    assert host.configManager.graphicsManager.graphicsConfig.hostDefaultGraphicsType == "shared"


@pytest.mark.vcsim
def test_verify_only_names_the_override_too(provider: HostGraphicsModeProvider, host: Any) -> None:
    set_active_graphics(host, "sharedDirect")
    _override(host, "shared")
    host.configManager.serviceSystem.RestartService(id="xorg")

    with pytest.raises(VsphereError) as failed:
        provider.create({"host_name": host.name, "manage": False, "assignment_policy": "performance"})

    assert "graphicsConfig.deviceType" in str(failed.value) and T4_PCI_ID in str(failed.value)


class _StuckHost:
    """A host whose GPU never leaves shared mode, no VM holding it, no override: what a slow or
    failed X server start looks like through the API."""

    def __init__(self) -> None:
        self.name = "esx-slow"
        self.refreshes = 0
        info = SimpleNamespace(
            vendorName="NVIDIA Corporation", graphicsType="shared", vm=[], pciId=T4_PCI_ID, deviceName="T4"
        )
        config = SimpleNamespace(
            hostDefaultGraphicsType="sharedDirect", sharedPassthruAssignmentPolicy="performance", deviceType=[]
        )
        manager = SimpleNamespace(graphicsConfig=config, graphicsInfo=[info], RefreshGraphicsManager=self._refresh)
        self.configManager = SimpleNamespace(graphicsManager=manager)

    def _refresh(self) -> None:
        self.refreshes += 1


def test_waiting_for_the_active_type_is_bounded_and_says_so() -> None:
    host, now, slept = _StuckHost(), [0.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    with pytest.raises(VsphereError) as failed:
        wait_until_active(host, restart_error=None, timeout=9.0, interval=3.0, sleep=sleep, clock=lambda: now[0])

    assert slept == [3.0, 3.0, 3.0]
    assert host.refreshes == 4  # refreshed before every look
    assert "still runs in 'shared' mode 9s after the xorg restart" in str(failed.value)
