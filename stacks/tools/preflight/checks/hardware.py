"""The VM hardware version against each host's ESXi version.

VMware KB 2007240, "ESXi/ESX hosts and compatible virtual machine hardware versions": the oldest
ESXi release that runs each hardware version. A host older than that cannot register or power on
the VM (vCenter refuses the clone with `VirtualHardwareVersionNotSupported`). Hardware version 16
is a Workstation/Fusion version that no ESXi release runs.
"""

from __future__ import annotations

from components.vcenter.inventory_model import Inventory
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.report import Report, version_tuple

MIN_ESXI: dict[int, tuple[tuple[int, ...], str]] = {
    13: ((6, 5, 0), "ESXi 6.5"),
    14: ((6, 7, 0), "ESXi 6.7"),
    15: ((6, 7, 2), "ESXi 6.7 U2"),
    17: ((7, 0, 0), "ESXi 7.0"),
    18: ((7, 0, 1), "ESXi 7.0 U1"),
    19: ((7, 0, 2), "ESXi 7.0 U2"),
    20: ((8, 0, 0), "ESXi 8.0"),
    21: ((8, 0, 2), "ESXi 8.0 U2"),
    22: ((9, 0, 0), "ESXi 9.0"),
}
"""vmx-N -> (the oldest ESXi version that runs it, its release name); KB 2007240."""


def check_hardware_version(env: Environment, inv: Inventory, report: Report) -> None:
    wanted = env.vm.hardware_version
    key = ("vm", "hardwareVersion")
    if wanted not in MIN_ESXI:
        known = ", ".join(f"{v} ({name})" for v, (_, name) in MIN_ESXI.items())
        report.blocker(key, f"no ESXi release runs hardware version {wanted} (KB 2007240: {known})")
        return
    minimum, release = MIN_ESXI[wanted]
    gpu_hosts = {h.name for h in env.hosts}
    too_old = []
    cluster_too_old = []
    for host in inv.hosts.values():
        if not host.version or version_tuple(host.version) >= minimum:
            continue
        if host.name in gpu_hosts:
            too_old.append(f"{host.name!r} (ESXi {host.version})")
        elif host.cluster == env.vcenter.compute_cluster:
            cluster_too_old.append(f"{host.name!r} (ESXi {host.version})")
    if too_old:
        report.blocker(
            key,
            f"hardware version {wanted} needs {release} or later (KB 2007240); GPU hosts "
            f"{', '.join(too_old)} are older: lower vm.hardwareVersion or upgrade them",
        )
    elif cluster_too_old:
        report.warn(
            key,
            f"hardware version {wanted} needs {release} or later; cluster hosts {', '.join(cluster_too_old)} "
            "are older, so the control plane cannot run (or move) there",
        )
    else:
        report.ok(key, f"hardware version {wanted} runs on every host named (needs {release} or later)")
