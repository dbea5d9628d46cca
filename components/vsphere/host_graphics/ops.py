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
we report and wait for. Two more things stand between a restart and that:

- `graphicsInfo` shows what the devices ran in at the last `RefreshGraphicsManager` ("Refresh the
  available graphics information", vSphere Web Services API, HostGraphicsManager; pyvmomi
  docs/vim/host/GraphicsManager.rst), so after the restart we refresh, and poll with a bound
  (`wait_until_active`): the X server takes a moment to come back;
- a per-device override, `graphicsConfig.deviceType[]` (`HostGraphicsConfigDeviceType`, set in
  vCenter under Graphics Devices or with `esxcli graphics device set`), beats the host default
  for that device: a GPU overridden to `shared` stays there whatever the default says, and the
  error names the override and the device.

What the host had before we changed it is also written on the host, as the custom attribute
`PREVIOUS_FIELD` ("<type>/<policy>"), before the change: if Pulumi's state is lost after a create
(an interrupted `up`, a re-imported stack), the next create finds our earlier record there rather
than taking our own Shared Direct for the admin's choice, and delete still restores the original.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
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
#: How long after the Xorg restart the GPU may take to show Shared Direct, and how often we look.
ACTIVE_TIMEOUT_S = 30.0
ACTIVE_POLL_S = 3.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceOverride:
    """A per-device graphics type (`graphicsConfig.deviceType[]`) that is not Shared Direct."""

    device_id: str
    """The device's PCI id (`HostGraphicsConfigDeviceType.deviceId` = `graphicsInfo[].pciId`)."""
    device_name: str
    graphics_type: str


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
    overrides: tuple[DeviceOverride, ...] = ()
    """Per-device types that keep an NVIDIA device out of Shared Direct whatever the default."""


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
    names = {info.pciId: info.deviceName or info.pciId for info in nvidia}
    overrides = tuple(
        DeviceOverride(entry.deviceId, names[entry.deviceId], entry.graphicsType)
        for entry in (config.deviceType or [] if config else [])
        # An empty type is no override: the device follows the host default.
        if entry.deviceId in names and entry.graphicsType and entry.graphicsType != SHARED_DIRECT
    )
    return GraphicsState(configured, policy, others[0] if others else SHARED_DIRECT, tuple(vms), overrides)


def refresh(host: Any) -> None:
    """Have the host re-read its graphics devices, so `graphicsInfo` shows what they run in now.

    Best effort where it is not allowed (it needs Host.Config.Settings; a verify-only user may
    lack it): the state is then as of the host's last refresh.
    """
    try:
        _manager(host).RefreshGraphicsManager()
    except vim.fault.NoPermission as exc:
        _log.debug("host %s: RefreshGraphicsManager not allowed (%s); graphicsInfo may be stale", host.name, exc)


def read_current_state(host: Any) -> GraphicsState:
    """`read_state` after a refresh: the devices' mode now, not at the last refresh."""
    refresh(host)
    return read_state(host)


def wait_until_active(
    host: Any,
    *,
    restart_error: str | None,
    timeout: float = ACTIVE_TIMEOUT_S,
    interval: float = ACTIVE_POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> GraphicsState:
    """Refresh and read until the NVIDIA device(s) run in Shared Direct; raise when they do not.

    Fails at once when waiting cannot help (VMs hold the GPU, a device override keeps it out of
    Shared Direct), else after `timeout` seconds, looking every `interval` seconds.
    """
    deadline = clock() + timeout
    while True:
        state = read_current_state(host)
        if state.active_type == SHARED_DIRECT:
            return state
        if state.gpu_vms or state.overrides or clock() + interval > deadline:
            waited = "" if state.gpu_vms or state.overrides else f" {timeout:.0f}s after the xorg restart"
            raise VsphereError(
                not_active_message(host.name, state, restart_error, waited=waited), object_name=host.name
            )
        sleep(interval)


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


def override_message(host_name: str, state: GraphicsState) -> str:
    """A per-device override keeps the GPU out of Shared Direct: name it, the device and the fix."""
    devices = "; ".join(
        f"device {o.device_id} ({o.device_name}) is set to {o.graphics_type!r}" for o in state.overrides
    )
    return (
        f"host {host_name}: a per-device graphics type override (graphicsConfig.deviceType) keeps the "
        f"NVIDIA GPU out of '{SHARED_DIRECT}' (Shared Direct) whatever the host default is: {devices}. "
        "Fix: change that device's graphics type to Shared Direct, or remove the override (vCenter: Host > "
        "Configure > Hardware > Graphics > Graphics Devices > Edit; or `esxcli graphics device set` on the "
        "host), restart Xorg with the GPU's VMs powered off, then run `pulumi up` again."
    )


def not_active_message(host_name: str, state: GraphicsState, restart_error: str | None, *, waited: str = "") -> str:
    """Why Shared Direct is configured but not active, and what to do."""
    if state.overrides:
        return override_message(host_name, state)
    if state.gpu_vms:
        why = f"these VMs hold the GPU and are still powered on: {', '.join(state.gpu_vms)}"
    elif restart_error:
        why = f"restarting the host's xorg service failed ({restart_error})"
    else:
        why = "the GPU did not switch when the host's xorg service restarted"
    return (
        f"host {host_name}: the default graphics type is configured as '{SHARED_DIRECT}' (Shared "
        f"Direct) but the NVIDIA GPU still runs in {state.active_type!r} mode{waited}: {why}. VMware's "
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
