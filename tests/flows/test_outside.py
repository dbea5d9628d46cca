"""Issue 51 item 1: a pod's connections to hosts outside the cluster, through Calico's natOutgoing.

Calico masquerades them with a random node port from 1024-65535 (tests/flows/network_lab.py,
`nat_outgoing`), so a reply may be addressed to a node port in 30000-32767, where the node
firewall's NodePort filter sits ahead of conntrack's un-NAT. Waiting for the random draw to land
there would make a test that passes by luck; here the node's masquerade keeps the pod's own source
port instead (the same rule, its range narrowed to that port) and the pod sweeps every NodePort,
TCP and UDP, through the node's real first-boot ruleset. The NodePort protection itself (a new
connection from outside to a NodePort is dropped) is held by the flow matrix
(`outside-to-node-port`).
"""

from __future__ import annotations

import os

import pytest

from components.k8s.node_bootstrap.firewall import NODE_PORTS
from components.k8s.node_bootstrap.paths import FIREWALL_RULES_PATH
from tests.flows.network_lab import Lab, Probe
from tests.flows.shapes import POD_POOL, WORKERS, Shape, first_boot_files, moment_for
from tests.real_parts import require_program, unavailable

OUTSIDE_HOST = "198.51.100.10"
"""Outside every network the firewall knows (an S3 endpoint, a package mirror, a site resolver)."""
POD = "10.244.1.10"
BATCH = 256
"""Probes at once (the listener's backlog is larger: tests/flows/network_lab.py `Listeners`)."""


@pytest.fixture(scope="module")
def nft() -> str:
    if os.geteuid() != 0:
        unavailable("network namespaces", "the flow lab needs root (ip netns)")
    require_program("ip", "/usr/sbin/ip", "iproute2")
    return require_program("nft", "/usr/sbin/nft", "nftables")


def test_a_pods_outside_connections_get_their_replies_on_every_node_port(lab: Lab) -> None:
    moment = moment_for(Shape("tcp", 1, False, True))
    management, rdma = WORKERS["gpu-1"]
    node = lab.node("gpu-1", f"{management}/24", f"{rdma}/24", POD_POOL, keep_source_port=True)
    lab.load(node, first_boot_files(moment.booted["gpu-1"], "gpu-1")[FIREWALL_RULES_PATH])
    pod = lab.pod("tenant-pod", node, POD)
    outside = lab.machine("outside-host", management=[f"{OUTSIDE_HOST}/24"])
    lab.flush()
    lab.listen({outside: ({443}, {53})})
    # One connection first, from a port outside the range: the node and the outside host learn
    # each other's MAC (a burst of SYNs to an unresolved neighbour overflows its queue).
    assert lab.probe([Probe(pod, POD, OUTSIDE_HOST, 443, source_port=40000)]) == [True]
    first, last = (int(p) for p in NODE_PORTS.split("-"))
    refused: dict[str, list[int]] = {}
    for protocol, port in (("tcp", 443), ("udp", 53)):
        for start in range(first, last + 1, BATCH):
            ports = list(range(start, min(start + BATCH, last + 1)))
            for _ in range(2):  # a port the firewall drops fails both tries; a busy machine's lost packet does not
                answered = lab.probe([Probe(pod, POD, OUTSIDE_HOST, port, protocol, source_port=p) for p in ports])
                ports = [p for p, ok in zip(ports, answered, strict=True) if not ok]
            refused.setdefault(protocol, []).extend(ports)
    summary = {protocol: (len(ports), ports[:5]) for protocol, ports in refused.items() if ports}
    assert not summary, f"replies to the node's masqueraded ports dropped (count, first ports): {summary}"
