"""Rules that relate several parts of an environment: addresses, uplinks, placement, pools.

Each rule is a function from an `Environment` to the problems it finds, every problem naming the
exact key path (camelCase, as written in the stack file) and the fix. `check` runs every rule of
every subject module (the package imports them all), so one run reports every problem at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network

from stacks.environment.model import Environment, NodePool
from stacks.environment.registry import BACKSTOPS, RULES, Path, Problem, Rule, check, format_path, rule, run_rule

__all__ = ["BACKSTOPS", "RULES", "Path", "Problem", "Rule", "check", "format_path", "rule", "run_rule"]


def _pools(env: Environment) -> list[tuple[str, NodePool]]:
    return [("controlPlane", env.control_plane), ("gpuWorkers", env.gpu_workers)]


def _in_subnet(address: IPv4Address, subnet: IPv4Network) -> bool:
    return address in subnet and address not in (subnet.network_address, subnet.broadcast_address)


@rule
def addresses_inside_their_subnets(env: Environment) -> Iterator[Problem]:
    mgmt, rdma = env.management_network.subnet, env.rdma_network.subnet
    if not _in_subnet(env.management_network.gateway, mgmt):
        yield Problem(
            ("managementNetwork", "gateway"),
            f"{env.management_network.gateway} is not a host address of managementNetwork.subnet {mgmt}",
        )
    gateway = env.rdma_network.gateway
    if gateway is not None and not _in_subnet(gateway, rdma):
        yield Problem(("rdmaNetwork", "gateway"), f"{gateway} is not a host address of rdmaNetwork.subnet {rdma}")
    for i, host in enumerate(env.hosts):
        if not _in_subnet(host.vmknic_ip, rdma):
            yield Problem(
                ("hosts", i, "vmknicIp"),
                f"{host.vmknic_ip} is not a host address of rdmaNetwork.subnet {rdma}; pick one inside it",
            )
    for pool_key, pool in _pools(env):
        for j, node in enumerate(pool.nodes):
            if not _in_subnet(node.management_ip, mgmt):
                yield Problem(
                    (pool_key, "nodes", j, "managementIp"),
                    f"{node.management_ip} is not a host address of managementNetwork.subnet {mgmt}; pick one inside it",
                )
            if node.rdma_ip is not None and not _in_subnet(node.rdma_ip, rdma):
                yield Problem(
                    (pool_key, "nodes", j, "rdmaIp"),
                    f"{node.rdma_ip} is not a host address of rdmaNetwork.subnet {rdma}; pick one inside it",
                )


@rule
def addresses_unique(env: Environment) -> Iterator[Problem]:
    seen: dict[IPv4Address, Path] = {}
    reserved: dict[IPv4Address, str] = {env.management_network.gateway: "managementNetwork.gateway"}
    if env.rdma_network.gateway is not None:
        reserved[env.rdma_network.gateway] = "rdmaNetwork.gateway"
    claims: list[tuple[IPv4Address, Path]] = [(h.vmknic_ip, ("hosts", i, "vmknicIp")) for i, h in enumerate(env.hosts)]
    for pool_key, pool in _pools(env):
        for j, node in enumerate(pool.nodes):
            claims.append((node.management_ip, (pool_key, "nodes", j, "managementIp")))
            if node.rdma_ip is not None:
                claims.append((node.rdma_ip, (pool_key, "nodes", j, "rdmaIp")))
    for address, path in claims:
        if address in reserved:
            yield Problem(path, f"{address} is the {reserved[address]}; give this one its own address")
        elif address in seen:
            yield Problem(
                path, f"{address} is already used by {format_path('', seen[address])}; addresses must be unique"
            )
        else:
            seen[address] = path


def _named_addresses(env: Environment) -> dict[IPv4Address, str]:
    """Every address the stack gives a role, to the key that gives it."""
    named: dict[IPv4Address, str] = {env.management_network.gateway: "managementNetwork.gateway"}
    if env.rdma_network.gateway is not None:
        named[env.rdma_network.gateway] = "rdmaNetwork.gateway"
    for i, host in enumerate(env.hosts):
        named.setdefault(host.vmknic_ip, f"hosts[{i}].vmknicIp")
    for pool_key, pool in _pools(env):
        for j, node in enumerate(pool.nodes):
            named.setdefault(node.management_ip, f"{pool_key}.nodes[{j}].managementIp")
            if node.rdma_ip is not None:
                named.setdefault(node.rdma_ip, f"{pool_key}.nodes[{j}].rdmaIp")
    return named


@rule
def service_addresses_are_not_node_addresses(env: Environment) -> Iterator[Problem]:
    """A DNS server or an API endpoint given as an address the stack already gives a node, a vmknic
    or a gateway: nothing of ours serves DNS there, and an endpoint on a worker, a host's vmknic or
    the gateway never reaches an API server (kubeadm writes it into every kubeconfig and join)."""
    named = _named_addresses(env)
    for i, server in enumerate(env.management_network.dns_servers):
        key = named.get(server)
        if key is not None and key != "managementNetwork.gateway":  # a gateway often resolves too
            yield Problem(
                ("managementNetwork", "dnsServers", i),
                f"{server} is {key}, which runs no DNS server; give the site's DNS server",
            )
    endpoint = env.kubernetes.control_plane_endpoint
    if endpoint is None:
        return
    try:
        address = IPv4Address(str(endpoint))
    except ValueError:  # a DNS name: the load balancer's
        return
    dns = {server: f"managementNetwork.dnsServers[{i}]" for i, server in enumerate(env.management_network.dns_servers)}
    key = named.get(address) or dns.get(address)
    own_node = key is not None and key.startswith("controlPlane.nodes[") and key.endswith(".managementIp")
    if key is not None and not own_node:  # a control-plane node's own address: control_plane_quorum
        yield Problem(
            ("kubernetes", "controlPlaneEndpoint"),
            f"{endpoint} is {key}, where no API server listens; give the control plane's address, "
            "or with several control-plane nodes a load-balanced DNS name or VIP",
        )


@rule
def ranges_do_not_overlap(env: Environment) -> Iterator[Problem]:
    ranges: list[tuple[Path, IPv4Network]] = [
        (("rdmaNetwork", "subnet"), env.rdma_network.subnet),
        (("managementNetwork", "subnet"), env.management_network.subnet),
        (("kubernetes", "podCidr"), env.kubernetes.pod_cidr),
        (("kubernetes", "serviceCidr"), env.kubernetes.service_cidr),
    ]
    for i, (path_a, net_a) in enumerate(ranges):
        for path_b, net_b in ranges[i + 1 :]:
            if net_a.overlaps(net_b):
                yield Problem(
                    path_b,
                    f"{net_b} overlaps {format_path('', path_a)} {net_a}; the RDMA, management, pod and service ranges must be disjoint",
                )


ROCE_HEADER_BYTES = 40 + 8 + 12 + 4 + 28 + 4
"""What RoCE v2 takes from an Ethernet MTU before its path MTU: GRH, UDP, BTH, XRC and AtomicETH
extension headers, ICRC (Linux include/rdma/ib_addr.h `iboe_get_mtu`)."""
IB_MTUS = (4096, 2048, 1024, 512, 256)


def roce_path_mtu(ethernet_mtu: int) -> int:
    """The InfiniBand MTU RoCE runs with over an interface of this MTU (`iboe_get_mtu`): the largest
    IB MTU that fits once the headers are taken off (1500 -> 1024, 9000 -> 4096)."""
    room = ethernet_mtu - ROCE_HEADER_BYTES
    return next((mtu for mtu in IB_MTUS if room >= mtu), 256)


@rule
def mtu_fits_switch(env: Environment) -> Iterator[Problem]:
    net = env.rdma_network
    if net.vmknic_mtu > net.mtu:
        yield Problem(
            ("rdmaNetwork", "vmknicMtu"),
            f"{net.vmknic_mtu} is above the switch MTU rdmaNetwork.mtu {net.mtu}; lower it or raise the switch MTU",
        )
    elif roce_path_mtu(net.vmknic_mtu) < roce_path_mtu(net.mtu):
        # Refused, not warned: nothing breaks, so nothing would ever show it, but every RDMA message
        # is cut into more, smaller packets than the jumbo switch (which the policy pack demands)
        # carries, and NCCL's bus bandwidth drops with no error anywhere.
        yield Problem(
            ("rdmaNetwork", "vmknicMtu"),
            f"{net.vmknic_mtu} under a {net.mtu} switch caps RoCE's path MTU at {roce_path_mtu(net.vmknic_mtu)} bytes "
            f"instead of {roce_path_mtu(net.mtu)} (RoCE runs the largest InfiniBand MTU that fits the interface MTU "
            f"less {ROCE_HEADER_BYTES} bytes of headers), so every RDMA transfer is split into smaller packets for "
            f"nothing; set vmknicMtu to {net.mtu} (the default follows the switch), or at least "
            f"{roce_path_mtu(net.mtu) + ROCE_HEADER_BYTES}",
        )


@rule
def one_rdma_uplink_per_host(env: Environment) -> Iterator[Problem]:
    for i, host in enumerate(env.hosts):
        if not host.rdma_vmnics:
            yield Problem(("hosts", i, "rdmaVmnics"), "empty; list the host's ConnectX (RoCE) vmnic, e.g. [vmnic4]")
        elif len(host.rdma_vmnics) != 1:
            yield Problem(
                ("hosts", i, "rdmaVmnics"),
                f"lists {len(host.rdma_vmnics)} vmnics; PVRDMA does not support NIC teaming, so give exactly one (the ConnectX port)",
            )


@rule
def names_unique(env: Environment) -> Iterator[Problem]:
    hosts: dict[str, int] = {}
    for i, host in enumerate(env.hosts):
        # ESXi host names are DNS names: vCenter finds `ESXI-01.lab` and `esxi-01.lab` as one host.
        key = host.name.casefold().rstrip(".")
        if key in hosts:
            first = env.hosts[hosts[key]].name
            same = (
                "listed twice"
                if first == host.name
                else f"the same host as hosts[{hosts[key]}] {first!r} (names are not case-sensitive)"
            )
            yield Problem(("hosts", i, "name"), f"host {host.name!r} is {same}; list each ESXi host once")
        else:
            hosts[key] = i
    nodes: set[str] = set()
    for pool_key, pool in _pools(env):
        for j, node in enumerate(pool.nodes):
            if node.name in nodes:
                yield Problem(
                    (pool_key, "nodes", j, "name"),
                    f"node name {node.name!r} is used twice; node names must be unique across pools",
                )
            nodes.add(node.name)


@rule
def workers_placed_on_known_hosts(env: Environment) -> Iterator[Problem]:
    workers = env.gpu_workers
    known = {h.name for h in env.hosts}
    per_host: dict[str, list[int]] = defaultdict(list)
    for j, node in enumerate(workers.nodes):
        path: Path = ("gpuWorkers", "nodes", j, "host")
        if node.host is None:
            if workers.placement == "vm-host-rules":
                yield Problem(
                    path,
                    "missing; with gpuWorkers.placement 'vm-host-rules' every worker names the ESXi host it runs on",
                )
            continue
        if node.host not in known:
            yield Problem(
                path, f"{node.host!r} is not one of the hosts listed under hosts; add it there or fix the name"
            )
        per_host[node.host].append(j)
    if workers.placement == "vm-host-rules":
        for host, indexes in per_host.items():
            for j in indexes[1:]:
                yield Problem(
                    ("gpuWorkers", "nodes", j, "host"),
                    f"{host!r} already runs gpuWorkers.nodes[{indexes[0]}]; strict placement allows one GPU worker per ESXi host",
                )
    if workers.placement != "none" and len(workers.nodes) > len(env.hosts):
        yield Problem(
            ("gpuWorkers", "nodes"),
            f"{len(workers.nodes)} workers but only {len(env.hosts)} GPU hosts; with placement {workers.placement!r} each worker needs its own host (add hosts or set placement: none)",
        )


@rule
def workers_have_rdma_addresses(env: Environment) -> Iterator[Problem]:
    for j, node in enumerate(env.gpu_workers.nodes):
        if node.rdma_ip is None:
            yield Problem(
                ("gpuWorkers", "nodes", j, "rdmaIp"),
                "missing; every GPU worker gets a PVRDMA NIC and needs its address on rdmaNetwork.subnet",
            )
    for j, node in enumerate(env.control_plane.nodes):
        if node.rdma_ip is not None or node.host is not None:
            key = "rdmaIp" if node.rdma_ip is not None else "host"
            yield Problem(
                ("controlPlane", "nodes", j, key),
                "control-plane nodes have no PVRDMA NIC and are not pinned; remove this key",
            )


@rule
def full_memory_reservation(env: Environment) -> Iterator[Problem]:
    workers = env.gpu_workers
    if workers.memory_reservation_mb is not None and workers.memory_reservation_mb != workers.memory_mb:
        yield Problem(
            ("gpuWorkers", "memoryReservationMb"),
            f"{workers.memory_reservation_mb} differs from gpuWorkers.memoryMb {workers.memory_mb}; vGPU VMs need all memory reserved, so remove this key",
        )


@rule
def control_plane_quorum(env: Environment) -> Iterator[Problem]:
    count = len(env.control_plane.nodes)
    if count % 2 == 0:
        yield Problem(
            ("controlPlane", "nodes"),
            f"{count} control-plane nodes; etcd needs an odd number (1, 3 or 5) to keep quorum",
        )
    if env.kubernetes.mode != "bootstrap":
        # An existing cluster's API address is in its kubeconfig; the endpoint key is the kubeadm
        # bootstrap's alone (and refused in this mode by kubernetes_settings_match_the_mode).
        return
    endpoint = env.kubernetes.control_plane_endpoint
    if count > 1 and not endpoint:
        yield Problem(
            ("kubernetes", "controlPlaneEndpoint"),
            f"missing; with {count} control-plane nodes the API needs a load-balanced DNS name or VIP",
        )
    own = {str(node.management_ip): node.name for node in env.control_plane.nodes}
    if count > 1 and endpoint and str(endpoint) in own:
        # The nodes' kubeconfigs and the joins all go to the endpoint: through one node's own
        # address the API is gone while that node is (a rolling replacement takes each one down),
        # and a replaced first node could only join itself.
        yield Problem(
            ("kubernetes", "controlPlaneEndpoint"),
            f"{endpoint} is control-plane node {own[str(endpoint)]}'s own address; with {count} nodes it must be "
            "a load-balanced DNS name or VIP in front of all of them",
        )


@rule
def slots_fit_gpus(env: Environment) -> Iterator[Problem]:
    gpus = len(env.gpu_workers.vgpu_profiles)
    slots = env.jobs.sample.slots_per_worker
    if slots > gpus:
        yield Problem(
            ("jobs", "sample", "slotsPerWorker"),
            f"{slots} ranks per worker but each worker has {gpus} vGPU(s); use at most {gpus}",
        )
