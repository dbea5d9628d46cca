"""Each RDMA vmnic paired with a RoCE-capable RDMA device.

vSphere API 7.0+: `HostNetworkInfo.rdmaDevice[]` lists the host's RDMA devices (`HostRdmaDevice`:
`vmrdma0`, ...); a device backed by a physical NIC has `backing` of type
`HostRdmaDevicePnicBacking` whose `pairedUplink` is that vmnic, and `capability`
(`HostRdmaDeviceCapability`) says whether it speaks RoCE v1/v2 or iWARP. PVRDMA between hosts
needs the HCA's RDMA device: vSphere Networking, "Remote Direct Memory Access for Virtual Machines":
"For two virtual machines that run on different ESXi hosts, when at least one of the hosts does not
have a physical RDMA device, the communication falls back to a TCP-based channel and the
performance is reduced." Nothing fails: NCCL over it is simply no faster than sockets.
"""

from __future__ import annotations

from components.vcenter.inventory_model import Inventory
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.report import Report


def check_rdma_devices(env: Environment, inv: Inventory, report: Report) -> None:
    if not inv.rdma_reported:
        report.warn(
            ("hosts",),
            "vCenter's API is older than 7.0 and does not report RDMA devices: whether each RDMA vmnic is "
            "paired with a RoCE device (else PVRDMA falls back to TCP) was not checked",
        )
        return
    for index, spec in enumerate(env.hosts):
        host = inv.hosts.get(spec.name)
        if host is None:
            continue  # reported by the host checks
        for nic_index, vmnic in enumerate(spec.rdma_vmnics):
            if vmnic not in host.pnics:
                continue  # reported by the host checks
            path = ("hosts", index, "rdmaVmnics", nic_index)
            paired = [d for d in host.rdma_devices if d.paired_uplink == vmnic]
            known = ", ".join(
                f"{d.device}->{d.paired_uplink or 'no uplink'}{'' if d.roce else ' (no RoCE)'}"
                for d in host.rdma_devices
            )
            if not paired:
                report.blocker(
                    path,
                    f"{vmnic} on {spec.name!r} has no RDMA device paired with it (rdmaDevice[].backing.pairedUplink; "
                    f"host's RDMA devices: {known or 'none'}); PVRDMA between hosts would fall back to TCP. "
                    "Use the vmnic of the RoCE HCA (esxcli rdma device list), or install its RDMA driver",
                )
            elif not any(d.roce for d in paired):
                report.blocker(
                    path,
                    f"{vmnic} on {spec.name!r} is paired with {', '.join(d.device for d in paired)}, which is not "
                    "RoCE-capable (capability.roceV1Capable/roceV2Capable false); PVRDMA needs RoCE",
                )
            else:
                device = next(d for d in paired if d.roce)
                report.ok(path, f"{vmnic} on {spec.name!r} is paired with RoCE device {device.device}")
