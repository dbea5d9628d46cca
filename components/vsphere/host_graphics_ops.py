"""pyvmomi operations on one ESXi host's graphics, for the `HostGraphicsMode` provider.

Two values matter and they differ (VMware, vSphere Resource Management, "Configuring Host
Graphics": "After clicking OK, you must restart Xorg on the host"; the prerequisite is that the
GPU's virtual machines are powered off):

- the *configured* default graphics type, `HostGraphicsManager.graphicsConfig`, which
  `UpdateGraphicsConfig` changes at once;
- the *active* type of each graphics device, `HostGraphicsManager.graphicsInfo[].graphicsType`,
  which follows the configured one only when the host's `xorg` service restarts (or the host
  reboots) while no VM holds the device (`graphicsInfo[].vm`).

A vGPU VM powers on only when the NVIDIA device is *active* in Shared Direct mode, so that is what
we report and wait for.

What the host had before we changed it is also written on the host, as the custom attribute
`PREVIOUS_FIELD` ("<type>/<policy>"), before the change: if Pulumi's state is lost after a create
(an interrupted `up`, a re-imported stack), the next create finds our earlier record there rather
than taking our own Shared Direct for the admin's choice, and delete still restores the original.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyVmomi import vim, vmodl

from components.vcenter.errors import VsphereError
from components.vcenter.faults import fault_text

SHARED_DIRECT = "sharedDirect"
#: vSphere's default assignment policy ("Spread VMs across GPUs (best performance)").
DEFAULT_ASSIGNMENT_POLICY = "performance"
ASSIGNMENT_POLICIES = ("performance", "consolidation")
#: The ESXi service whose restart makes a new default graphics type take effect.
XORG_SERVICE = "xorg"
#: Host custom attribute holding the graphics settings from before our change.
PREVIOUS_FIELD = "vsphere-gpu-cluster.graphics-before"


@dataclass(frozen=True)
class GraphicsState:
    """What a host's graphics look like now."""

    configured_type: str
    """`graphicsConfig.hostDefaultGraphicsType`: what applies after the next Xorg restart."""
    policy: str
    """`graphicsConfig.sharedPassthruAssignmentPolicy`."""
    active_type: str
    """The NVIDIA device(s)' `graphicsInfo[].graphicsType` now: "sharedDirect" only when every
    NVIDIA device runs in that mode, else the first other mode found."""
    gpu_vms: tuple[str, ...]
    """Names of the VMs holding an NVIDIA device now (`graphicsInfo[].vm`)."""


def _manager(host: Any) -> Any:
    manager = host.configManager.graphicsManager
    if manager is None:
        raise VsphereError(
            f"host {host.name} has no graphics manager (vSphere 6.5 or later is needed for vGPU)",
            object_name=host.name,
        )
    return manager


def read_state(host: Any) -> GraphicsState:
    manager = _manager(host)
    config = manager.graphicsConfig
    configured = (config.hostDefaultGraphicsType if config else None) or "shared"
    policy = (config.sharedPassthruAssignmentPolicy if config else None) or DEFAULT_ASSIGNMENT_POLICY
    nvidia = [info for info in manager.graphicsInfo or [] if "nvidia" in (info.vendorName or "").lower()]
    if not nvidia:
        raise VsphereError(
            f"host {host.name} has no NVIDIA graphics device (graphicsInfo lists none): NVIDIA vGPU "
            "needs the GPU and its host driver (the NVIDIA vGPU Manager VIB) on every GPU host",
            object_name=host.name,
        )
    others = [info.graphicsType for info in nvidia if info.graphicsType != SHARED_DIRECT]
    vms = sorted({vm.name for info in nvidia for vm in info.vm or []})
    return GraphicsState(configured, policy, others[0] if others else SHARED_DIRECT, tuple(vms))


def write_config(host: Any, graphics_type: str, policy: str) -> None:
    manager = _manager(host)
    current = manager.graphicsConfig
    manager.UpdateGraphicsConfig(
        config=vim.host.GraphicsConfig(
            hostDefaultGraphicsType=graphics_type,
            sharedPassthruAssignmentPolicy=policy,
            # Per-device overrides are the admin's; send them back unchanged.
            deviceType=list(current.deviceType or []) if current is not None else [],
        )
    )


def restart_xorg(host: Any) -> str | None:
    """Restart the host's `xorg` service; None, or the fault text when the restart failed.

    A failed restart is not fatal by itself: since ESXi 7.0 U1 Xorg is not needed for devices in
    vGPU mode "and may not start when using them" (Broadcom KB 318047), while the device does
    switch. Callers judge success by the active type, and show this text when it did not switch.
    """
    services = host.configManager.serviceSystem
    if services is None:
        return f"host {host.name} has no service system"
    try:
        services.RestartService(id=XORG_SERVICE)
    except vmodl.MethodFault as exc:
        return fault_text(exc)
    return None


def not_active_message(host_name: str, state: GraphicsState, restart_error: str | None) -> str:
    """Why Shared Direct is configured but not active, and what to do."""
    if state.gpu_vms:
        why = f"these VMs hold the GPU and are still powered on: {', '.join(state.gpu_vms)}"
    elif restart_error:
        why = f"restarting the host's xorg service failed ({restart_error})"
    else:
        why = "the GPU did not switch when the host's xorg service restarted"
    return (
        f"host {host_name}: the default graphics type is configured as '{SHARED_DIRECT}' (Shared "
        f"Direct) but the NVIDIA GPU still runs in {state.active_type!r} mode: {why}. VMware's "
        "procedure needs the GPU's VMs powered off while Xorg restarts. Fix: power those VMs off (or "
        "put the host in maintenance mode) and run `pulumi up` again, or reboot the host."
    )


# ---------------------------------------------------------------------------------------------
# The host-side record of the settings before our change


def _field_key(si: Any, *, create: bool) -> int | None:
    manager = si.content.customFieldsManager
    for field in manager.field or []:
        if field.name == PREVIOUS_FIELD and field.managedObjectType in (vim.HostSystem, None):
            return int(field.key)
    if not create:
        return None
    try:
        return int(manager.AddCustomFieldDef(name=PREVIOUS_FIELD, moType=vim.HostSystem).key)
    except vim.fault.DuplicateName:
        # Another host's create added it a moment ago.
        return _field_key(si, create=False)


def read_previous(si: Any, host: Any) -> tuple[str, str] | None:
    """The (type, policy) our earlier create recorded on the host, or None."""
    key = _field_key(si, create=False)
    if key is None:
        return None
    # vCenter keeps one value per key; the last one is read so that a list with stale entries
    # (govmomi's simulator appends on SetField) still gives the newest.
    values = [str(getattr(v, "value", "") or "") for v in host.customValue or [] if v.key == key]
    if not values or not values[-1]:
        return None
    graphics_type, _, policy = values[-1].partition("/")
    return graphics_type, policy or DEFAULT_ASSIGNMENT_POLICY


def write_previous(si: Any, host: Any, previous: tuple[str, str] | None) -> None:
    """Record (or with None, clear) the settings from before our change on the host."""
    key = _field_key(si, create=previous is not None)
    if key is None:
        return
    value = "" if previous is None else f"{previous[0]}/{previous[1]}"
    si.content.customFieldsManager.SetField(entity=host, key=key, value=value)
