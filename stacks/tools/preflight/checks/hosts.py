"""The ESXi hosts: presence, cluster, state, version, RDMA vmnics, vGPU profiles, memory (graphics:
`graphics`)."""

from __future__ import annotations

from collections import defaultdict

from components.vcenter.inventory_model import HostInfo, Inventory
from stacks.environment.model import Environment, NodeSpec
from stacks.tools.preflight.checks.report import (
    EXISTS_NOTE,
    KeyPath,
    OurVms,
    Report,
    listing,
    version_tuple,
    worker_reservation_mb,
)

MEMORY_HEADROOM = 0.9
"""Above this share of a host's unreserved memory, the reservations fit but leave ESXi and other
VMs little room: a warning."""


def check_hosts(env: Environment, inv: Inventory, report: Report) -> None:
    switch_version = version_tuple(env.rdma_network.switch_version)
    for index, spec in enumerate(env.hosts):
        path: KeyPath = ("hosts", index)
        host = inv.hosts.get(spec.name)
        if host is None:
            where = f"datacenter {inv.datacenter!r}" if inv.datacenter else "vCenter"
            report.blocker((*path, "name"), f"host {spec.name!r} not found (hosts in {where}: {listing(inv.hosts)})")
            continue
        problems = 0
        if host.cluster != env.vcenter.compute_cluster:
            where = f"cluster {host.cluster!r}" if host.cluster else "no cluster (standalone)"
            report.blocker((*path, "name"), f"host {spec.name!r} is in {where}, not in {env.vcenter.compute_cluster!r}")
            problems += 1
        if not host.connected:
            report.blocker((*path, "name"), f"host {spec.name!r} is {host.connection_state}, not connected")
            problems += 1
        if host.maintenance:
            report.warn((*path, "name"), f"host {spec.name!r} is in maintenance mode; VMs cannot power on there")
        if host.version and version_tuple(host.version) < switch_version:
            report.blocker(
                ("rdmaNetwork", "switchVersion"),
                f"host {spec.name!r} runs ESXi {host.version}, older than the switch version "
                f"{env.rdma_network.switch_version}; lower switchVersion or upgrade the host",
            )
            problems += 1
        for nic_index, vmnic in enumerate(spec.rdma_vmnics):
            nic_path = (*path, "rdmaVmnics", nic_index)
            if vmnic not in host.pnics:
                report.blocker(
                    nic_path, f"host {spec.name!r} has no {vmnic} (physical NICs: {', '.join(host.pnics) or 'none'})"
                )
                problems += 1
            elif (
                vmnic in host.uplink_of
                and host.uplink_of[vmnic] != f"distributed switch {env.rdma_network.switch_name}"
            ):
                report.blocker(
                    nic_path,
                    f"{vmnic} on {spec.name!r} is already an uplink of {host.uplink_of[vmnic]}; free it for the RDMA switch",
                )
                problems += 1
        for profile_index, profile in enumerate(env.gpu_workers.vgpu_profiles):
            if profile not in host.vgpu_profiles:
                offered = ", ".join(host.vgpu_profiles) or "none (no vGPU-capable GPU or no NVIDIA host driver)"
                report.blocker(
                    ("gpuWorkers", "vgpuProfiles", profile_index),
                    f"host {spec.name!r} does not offer vGPU profile {profile!r} (offered: {offered})",
                )
                problems += 1
        ip = str(spec.vmknic_ip)
        if ip in host.vmknic_ips:
            report.warn((*path, "vmknicIp"), f"{ip} is on {host.vmknic_ips[ip]} of {spec.name!r}: {EXISTS_NOTE}")
        for other in inv.hosts.values():
            if other.name != spec.name and ip in other.vmknic_ips:
                report.blocker((*path, "vmknicIp"), f"{ip} is used by {other.vmknic_ips[ip]} of host {other.name!r}")
                problems += 1
        if not problems:
            report.ok(
                path,
                f"host {spec.name!r}: connected, ESXi {host.version}, {', '.join(spec.rdma_vmnics)} present, "
                f"offers {', '.join(env.gpu_workers.vgpu_profiles)}",
            )


def check_memory(env: Environment, inv: Inventory, report: Report, our_vms: OurVms) -> None:
    """Each host's unreserved memory against the full reservations of the workers pinned there."""
    reservation = worker_reservation_mb(env)
    pinned: dict[str, list[tuple[int, NodeSpec]]] = defaultdict(list)
    unpinned = 0
    for index, node in enumerate(env.gpu_workers.nodes):
        if env.gpu_workers.placement == "vm-host-rules" and node.host:
            pinned[node.host].append((index, node))
        else:
            unpinned += 1

    def unreserved(host: HostInfo) -> int:
        taken = sum(
            vm.reservation_mb
            for vm in inv.all_vms()
            if vm.host_moid == host.moid and vm.powered_on and vm.name not in our_vms
        )
        return host.memory_mb - taken

    for host_name, nodes in pinned.items():
        host = inv.hosts.get(host_name)
        if host is None:
            continue  # reported by the host checks
        need = reservation * len(nodes)
        free = unreserved(host)
        names = ", ".join(node.name for _, node in nodes)
        path: KeyPath = ("gpuWorkers", "nodes", nodes[0][0], "host")
        text = (
            f"{host_name!r}: workers {names} reserve {need} MB; the host has {host.memory_mb} MB, "
            f"{free} MB not reserved by other powered-on VMs"
        )
        if need > free:
            report.blocker(path, f"not enough memory on {text}")
        elif need > free * MEMORY_HEADROOM:
            report.warn(path, f"tight memory on {text}")
        else:
            report.ok(path, f"memory fits on {text}")
    if unpinned:
        hosts = [inv.hosts[h.name] for h in env.hosts if h.name in inv.hosts]
        free_total = sum(unreserved(h) for h in hosts)
        need = reservation * unpinned
        text = f"{unpinned} unpinned workers reserve {need} MB; the GPU hosts have {free_total} MB unreserved in all"
        fits_one = any(unreserved(h) >= reservation for h in hosts)
        if need > free_total or not fits_one:
            report.blocker(("gpuWorkers", "memoryMb"), f"not enough memory: {text}")
        else:
            report.ok(("gpuWorkers", "memoryMb"), text)
