"""The node firewall's ruleset read as rules (fast tier): which sources each protected port admits,
and that IPv6 reaches none of them. The same ruleset is loaded into network namespaces and
connected to for real in test_node_firewall.py and the flow matrix (tests/flows); this reading
catches a dropped port or a widened source without a namespace."""

from __future__ import annotations

import re

from components.k8s.node_bootstrap.firewall import (
    ETCD_CLIENT_PORT,
    ETCD_PEER_PORT,
    KUBELET_PORT,
    MPI_SSH_PORT,
    RENDEZVOUS_PORT,
    render_firewall,
)
from components.k8s.node_bootstrap.spec import NodeFirewall

PROTECTED = {ETCD_CLIENT_PORT, ETCD_PEER_PORT, KUBELET_PORT, MPI_SSH_PORT, RENDEZVOUS_PORT}


def _ruleset(admin: tuple[str, ...] = ()) -> str:
    from tests.components.k8s.node_bootstrap.test_node_firewall import MANAGEMENT, RDMA, spec

    return render_firewall(spec(), NodeFirewall(node_networks=[MANAGEMENT, RDMA], admin_networks=admin))


def _ports(text: str) -> set[int]:
    return {int(p) for p in re.findall(r"\d+", text)}


def _ipv6_dropped(ruleset: str) -> set[int]:
    [line] = [line for line in ruleset.splitlines() if line.strip().startswith("meta nfproto ipv6 tcp dport")]
    return _ports(line.split("dport", 1)[1].split("drop")[0])


def test_ipv6_reaches_no_protected_port() -> None:
    assert _ipv6_dropped(_ruleset()) >= PROTECTED
    assert {*PROTECTED, 6443} <= _ipv6_dropped(_ruleset(admin=("172.20.0.0/16",)))


def test_etcd_peers_are_the_control_plane_alone() -> None:
    ruleset = _ruleset()
    drops = [line.strip() for line in ruleset.splitlines() if line.strip().startswith(f"tcp dport {ETCD_PEER_PORT} ")]
    assert drops == [f"tcp dport {ETCD_PEER_PORT} ip saddr != @control_plane drop"]
    [elements] = re.findall(r"set control_plane \{[^}]*elements = \{([^}]*)\}", ruleset, re.S)
    assert elements.strip() == "10.10.0.50/31"  # cp-1 and cp-2 (10.10.0.50, .51), merged by the renderer


def _chain(ruleset: str, name: str) -> list[str]:
    [body] = re.findall(rf"chain {name} \{{\n(.*?)\n  \}}", ruleset, re.S)
    return [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_node_port_drops_spare_replies_to_connections_the_node_masqueraded() -> None:
    """Calico masquerades pods' outgoing connections `--random-fully`, so a reply may come back to
    a node port in 30000-32767 (issue 51 item 1): the chain sees it before the un-NAT and must let
    established and related packets through, dropping only what opens a connection."""
    rules = _chain(_ruleset(), "node_ports")
    assert rules[0].startswith("type filter hook prerouting priority mangle")
    drops = [i for i, rule in enumerate(rules) if rule.endswith(" drop")]
    assert drops, rules
    exemptions = [i for i, rule in enumerate(rules) if rule == "ct state established,related accept"]
    assert exemptions and exemptions[0] < drops[0], f"no conntrack exemption ahead of the NodePort drops: {rules}"
