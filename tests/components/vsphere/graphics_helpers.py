"""Arranging a simulated host's graphics as an admin would (used by fixtures and tests)."""

from __future__ import annotations

from typing import Any

from pyVmomi import vim


def set_active_graphics(host: Any, graphics_type: str, policy: str = "performance") -> None:
    """Configure the default graphics type, then restart Xorg so it is active: the harness, like
    ESXi, applies a new type only then, and only to a GPU no running VM holds. The refresh makes
    graphicsInfo show it (vcsim/graphics.go)."""
    manager = host.configManager.graphicsManager
    manager.UpdateGraphicsConfig(
        config=vim.host.GraphicsConfig(hostDefaultGraphicsType=graphics_type, sharedPassthruAssignmentPolicy=policy)
    )
    host.configManager.serviceSystem.RestartService(id="xorg")
    manager.RefreshGraphicsManager()
