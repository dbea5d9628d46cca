"""HostGraphicsMode against the vCenter simulator (graphics manager added by our harness)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vsphere.host_graphics import HostGraphicsModeProvider
from components.vsphere.provider_base import RetryPolicy

pytestmark = pytest.mark.vcsim

FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.1, max_delay=0.3, max_total=5)


def _graphics(find: Callable[[Any, str], Any], name: str) -> tuple[str, str]:
    config = find(vim.HostSystem, name).configManager.graphicsManager.graphicsConfig
    return config.hostDefaultGraphicsType, config.sharedPassthruAssignmentPolicy


def _set_graphics(find: Callable[[Any, str], Any], name: str, kind: str, policy: str) -> None:
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
