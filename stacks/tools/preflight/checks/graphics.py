"""Each GPU host's NVIDIA device: is it *actively* in Shared Direct (vGPU) mode, or can we switch it?

What a vGPU VM needs at power-on is the device's *active* mode, `graphicsInfo[].graphicsType`,
not the host's *configured* default (`graphicsConfig.hostDefaultGraphicsType`): a new default
takes effect only when the host's xorg service restarts while no VM holds the device (VMware,
vSphere Resource Management, "Configuring Host Graphics": VMs powered off, then "you must restart
Xorg on the host"; components/vsphere/host_graphics/ops.py, docs/rdma-host-settings.md).

- `hostGraphics.manage: false` (check only): a device not active in Shared Direct is a BLOCKER,
  whatever the configured default says.
- `hostGraphics.manage: true`: the program sets the default and restarts xorg
  (`HostGraphicsMode`); that switches the device only while no VM holds it, so VMs holding it now
  are a BLOCKER naming them, and otherwise a WARN says the switch and the restart will happen.
"""

from __future__ import annotations

from components.vcenter.inventory_model import HostInfo, Inventory
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.report import KeyPath, Report

SHARED_DIRECT = "sharedDirect"
"""`HostGraphicsConfigGraphicsType.sharedDirect` (the same value as host_graphics_ops.SHARED_DIRECT,
which imports pyVmomi)."""


def active_type(host: HostInfo) -> str | None:
    """Like `host_graphics_ops.read_state`: Shared Direct only when every NVIDIA device runs in it,
    else the first other mode; None without an NVIDIA device."""
    nvidia = [g for g in host.gpus if "nvidia" in g.vendor_name.lower()]
    if not nvidia:
        return None
    others = [g.graphics_type or "unknown" for g in nvidia if g.graphics_type != SHARED_DIRECT]
    return others[0] if others else SHARED_DIRECT


def _holders(host: HostInfo, inv: Inventory) -> list[str]:
    names = {vm.moid: vm.name for vm in inv.all_vms()}
    moids = {m for g in host.gpus if "nvidia" in g.vendor_name.lower() for m in g.vm_moids}
    return sorted(names.get(m, m) for m in moids)


def check_graphics(env: Environment, inv: Inventory, report: Report) -> None:
    manage = env.host_graphics.manage
    manage_key: KeyPath = ("hostGraphics", "manage")
    for index, spec in enumerate(env.hosts):
        host = inv.hosts.get(spec.name)
        if host is None:
            continue  # reported by the host checks
        active = active_type(host)
        if active is None:
            report.blocker(
                ("hosts", index, "name"),
                f"host {spec.name!r} has no NVIDIA graphics device (graphicsInfo lists none): vGPU needs the GPU "
                "and the NVIDIA vGPU Manager VIB on every GPU host",
            )
            continue
        if active == SHARED_DIRECT:
            report.ok(manage_key, f"host {spec.name!r}: the NVIDIA GPU runs in Shared Direct mode (vGPU)")
            continue
        configured = host.graphics_default or "unknown"
        now = f"host {spec.name!r}: the NVIDIA GPU runs in {active!r} mode now, not {SHARED_DIRECT!r} (vGPU needs it)"
        if configured == SHARED_DIRECT:
            now += f"; {SHARED_DIRECT!r} is configured but takes effect only when xorg restarts with the GPU's VMs off"
        else:
            now += f"; the configured default is {configured!r}"
        holders = _holders(host, inv)
        if not manage:
            report.blocker(
                manage_key,
                f"{now}. Switch it (Configure > Hardware > Graphics > Host Graphics: Shared Direct, then restart "
                "xorg with the GPU's VMs powered off) or set hostGraphics.manage: true",
            )
        elif holders:
            report.blocker(
                ("hosts", index, "name"),
                f"{now}. The program would set Shared Direct and restart xorg, but the GPU switches only "
                f"while no VM holds it, and these VMs hold it: {', '.join(holders)}. Power them off (or move "
                "them) first",
            )
        else:
            report.warn(
                manage_key,
                f"{now}. The program will set Shared Direct and restart the host's xorg service (no VM holds "
                "the GPU now; keep it that way until `pulumi up` has run)",
            )
