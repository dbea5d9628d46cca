"""Networks, switch and port group names, VM names and addresses already in use."""

from __future__ import annotations

from ipaddress import IPv4Address

from components.vcenter.inventory_model import Inventory
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.report import EXISTS_NOTE, KeyPath, OurVms, Report


def check_networks(env: Environment, inv: Inventory, report: Report) -> None:
    network = env.management_network.network_name
    if network in inv.networks:
        report.ok(("managementNetwork", "networkName"), f"network {network!r} exists")
    else:
        report.blocker(("managementNetwork", "networkName"), f"network {network!r} not found")
    rdma = env.rdma_network
    if rdma.switch_name in inv.switches:
        report.warn(("rdmaNetwork", "switchName"), f"distributed switch {rdma.switch_name!r} {EXISTS_NOTE}")
    else:
        report.ok(("rdmaNetwork", "switchName"), f"distributed switch name {rdma.switch_name!r} is free")
    if rdma.port_group_name in inv.networks:
        report.warn(("rdmaNetwork", "portGroupName"), f"port group {rdma.port_group_name!r} {EXISTS_NOTE}")
    else:
        report.ok(("rdmaNetwork", "portGroupName"), f"port group name {rdma.port_group_name!r} is free")


def check_names_and_addresses(env: Environment, inv: Inventory, report: Report, our_vms: OurVms) -> None:
    used_by: dict[str, str] = {}
    for vm in inv.all_vms():
        if vm.name in our_vms:
            continue
        for guest_ip in vm.guest_ips:
            used_by.setdefault(guest_ip, vm.name)
    taken = 0
    for vm_name, (pool_key, index, node) in our_vms.items():
        path: KeyPath = (pool_key, "nodes", index)
        if vm_name in inv.vms:
            report.warn((*path, "name"), f"VM {vm_name!r} {EXISTS_NOTE}")
            taken += 1
        addresses: list[tuple[str, IPv4Address]] = [("managementIp", node.management_ip)]
        if node.rdma_ip is not None:
            addresses.append(("rdmaIp", node.rdma_ip))
        for key, address in addresses:
            owner = used_by.get(str(address))
            if owner is not None:
                report.blocker((*path, key), f"{address} is in use by VM {owner!r} (reported by its guest tools)")
                taken += 1
    if not taken:
        report.ok(("vm", "namePrefix"), f"no VM named {env.vm.name_prefix}-* exists and no node address is in use")
