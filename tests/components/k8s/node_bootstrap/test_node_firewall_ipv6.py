"""The node firewall over IPv6: the cluster is IPv4, so every protected port is closed to IPv6.

The IPv4 allow-list (test_node_firewall.py) says nothing about IPv6: a node's link-local or SLAAC
address would reach etcd's peer port, the kubelet or the MPI workers' sshd from anywhere on the
segment if the ruleset's IPv6 drop missed one of them. Here the real `nft` loads the ruleset into a
network namespace with IPv6 addresses, listeners answer on every port over IPv6, and a peer
namespace connects: only the ports the firewall leaves alone answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.k8s.node_bootstrap.firewall import (
    ETCD_CLIENT_PORT,
    ETCD_PEER_PORT,
    KUBELET_PORT,
    MPI_SSH_PORT,
    RENDEZVOUS_PORT,
    render_firewall,
)
from components.k8s.node_bootstrap.spec import NodeFirewall
from tests.components.k8s.node_bootstrap.test_node_firewall import FIREWALL, MANAGEMENT, RDMA, spec
from tests.real_parts import require_program, unavailable

API_SERVER_PORT = 6443
SSH_PORT = 22
PORTS = [ETCD_CLIENT_PORT, ETCD_PEER_PORT, KUBELET_PORT, MPI_SSH_PORT, RENDEZVOUS_PORT, API_SERVER_PORT, SSH_PORT]
NODE_V6, PEER_V6 = "fd00:10::50", "fd00:10::51"
LISTENER = textwrap.dedent(
    """
    import selectors, socket, sys
    sel = selectors.DefaultSelector()
    for port in map(int, sys.argv[1:]):
        s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("::", port)); s.listen(16); s.setblocking(False); sel.register(s, selectors.EVENT_READ)
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            conn, _ = key.fileobj.accept(); conn.close()
    """
)
PROBE = textwrap.dedent(
    """
    import socket, sys
    target = sys.argv[1]
    for port in map(int, sys.argv[2:]):
        s = socket.socket(socket.AF_INET6); s.settimeout(1.0)
        try:
            s.connect((target, port)); print(port, "open")
        except OSError:
            print(port, "closed")
        finally:
            s.close()
    """
)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def namespaces() -> Iterator[tuple[str, str]]:
    """(node, peer): two namespaces on one veth with IPv6 addresses (no duplicate address
    detection, so they answer at once), a listener on every port of PORTS in the node."""
    if os.geteuid() != 0:
        unavailable("network namespaces", "the test needs root (ip netns)")
    require_program("ip", "/usr/sbin/ip", "iproute2")
    node, peer = f"fw6-node-{os.getpid()}", f"fw6-peer-{os.getpid()}"
    try:
        _ip("netns", "add", node)
        _ip("netns", "add", peer)
    except subprocess.CalledProcessError as error:
        unavailable("network namespaces", error.stderr.strip())
    listener = None
    try:
        _ip("link", "add", "fw6-n", "netns", node, "type", "veth", "peer", "name", "fw6-p", "netns", peer)
        for ns, dev, address in ((node, "fw6-n", NODE_V6), (peer, "fw6-p", PEER_V6)):
            _ip("-n", ns, "addr", "add", f"{address}/64", "dev", dev, "nodad")
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        listener = subprocess.Popen(
            ["ip", "netns", "exec", node, sys.executable, "-c", LISTENER, *map(str, PORTS)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert listener.stdout is not None and listener.stdout.readline().strip() == "ready"
        yield node, peer
    finally:
        if listener is not None:
            listener.kill()
            listener.wait()
        for ns in (node, peer):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def reachable_over_ipv6(peer: str) -> set[int]:
    result = subprocess.run(
        ["ip", "netns", "exec", peer, sys.executable, "-c", PROBE, NODE_V6, *map(str, PORTS)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return {int(line.split()[0]) for line in result.stdout.splitlines() if line.endswith("open")}


def load(node: str, firewall: NodeFirewall, tmp_path: Path) -> None:
    nft = require_program("nft", "/usr/sbin/nft", "nftables")
    rules = tmp_path / "firewall.nft"
    rules.write_text(render_firewall(spec(), firewall))
    loaded = subprocess.run(["ip", "netns", "exec", node, nft, "-f", str(rules)], capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr


def test_without_the_firewall_every_port_answers_over_ipv6(namespaces: tuple[str, str]) -> None:
    """The probe itself works: the ports below are closed by the ruleset, not by the network."""
    _, peer = namespaces
    assert reachable_over_ipv6(peer) == set(PORTS)


def test_every_protected_port_is_closed_over_ipv6(namespaces: tuple[str, str], tmp_path: Path) -> None:
    node, peer = namespaces
    load(node, FIREWALL, tmp_path)
    # The API server is left open when no admin networks are listed (it authenticates every request).
    assert reachable_over_ipv6(peer) == {API_SERVER_PORT, SSH_PORT}


def test_with_admin_networks_the_api_server_is_closed_over_ipv6_too(
    namespaces: tuple[str, str], tmp_path: Path
) -> None:
    node, peer = namespaces
    load(node, NodeFirewall(node_networks=[MANAGEMENT, RDMA], admin_networks=["172.20.0.0/16"]), tmp_path)
    assert reachable_over_ipv6(peer) == {SSH_PORT}
