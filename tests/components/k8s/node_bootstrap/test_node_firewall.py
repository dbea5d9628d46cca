"""Issue 37 item 6: the nodes' nftables allow-list of etcd, the kubelet and host-network job ports, over
IPv4 and IPv6 (issue 47: an IPv6 hole was a mutant no test caught).

The ruleset is checked by the real `nft` (`-c`: parsed and validated against the kernel's
nftables, not applied) and then exercised for real: loaded into a fresh network namespace that
plays a control-plane node, with listeners on the protected ports, and connected to from another
namespace with addresses inside and outside the cluster's networks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from components.k8s.jobs.mpijob import SSH_PORT
from components.k8s.node_bootstrap import ClusterNode, ClusterPki, ClusterSpec, UserDataRenderer
from components.k8s.node_bootstrap.firewall import (
    ETCD_CLIENT_PORT,
    ETCD_PEER_PORT,
    KUBELET_PORT,
    MPI_SSH_PORT,
    RENDEZVOUS_PORT,
    SYNC_INTERVAL_S,
    render_firewall,
)
from components.k8s.node_bootstrap.paths import (
    FIREWALL_RULES_PATH,
    FIREWALL_SYNC_SCRIPT_PATH,
    FIREWALL_SYNC_TIMER_PATH,
    FIREWALL_SYNC_UNIT_PATH,
    FIREWALL_UNIT_PATH,
    KUBELET_WANTS_FIREWALL_PATH,
    KUBELET_WANTS_FIREWALL_SYNC_PATH,
)
from components.k8s.node_bootstrap.spec import NodeFirewall
from tests.components.k8s.node_bootstrap.cluster_settings import (
    CONTROL_PLANE_JOIN,
    HANDOFF_SIGNER_PEM,
    PEM_FIELDS,
    TEST_ENCRYPTION_KEYS,
    cluster_settings,
)
from tests.real_parts import require_program, unavailable

MANAGEMENT = "10.10.0.0/24"
RDMA = "192.168.0.0/24"
CONTROL_PLANE = ["10.10.0.50", "10.10.0.51"]
FIREWALL = NodeFirewall(node_networks=[MANAGEMENT, RDMA])
PKI = ClusterPki(**{name: "x\n" for name in PEM_FIELDS}, secrets_encryption_keys=TEST_ENCRYPTION_KEYS)


def spec(firewall: NodeFirewall | None = FIREWALL) -> ClusterSpec:
    return ClusterSpec(
        **cluster_settings(
            control_plane_endpoint=CONTROL_PLANE[0],
            control_plane_nodes=[
                ClusterNode(name=f"cp-{i}", management_ip=ip) for i, ip in enumerate(CONTROL_PLANE, start=1)
            ],
            worker_nodes=[ClusterNode(name="gpu-1", management_ip="10.10.0.60", rdma_ip="192.168.0.60", gpu=True)],
            node_firewall=firewall,
        )
    )


def written(node: str, cluster: ClusterSpec) -> dict[str, str]:
    renderer = UserDataRenderer(
        cluster,
        token="abcdef.0123456789abcdef",
        ca_cert_hash="sha256:" + "0" * 64,
        control_plane_join=CONTROL_PLANE_JOIN,
        pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    )
    return {f["path"]: f["content"] for f in yaml.safe_load(renderer.render(node))["write_files"]}


def test_every_node_gets_the_table_and_the_kubelet_waits_for_it() -> None:
    for node in ("cp-1", "cp-2", "gpu-1"):
        files = written(node, spec())
        assert "table inet gpucluster" in files[FIREWALL_RULES_PATH]
        assert f"ExecStart=/usr/sbin/nft -f {FIREWALL_RULES_PATH}" in files[FIREWALL_UNIT_PATH]
        assert "Wants=gpucluster-firewall.service" in files[KUBELET_WANTS_FIREWALL_PATH]
        assert "After=gpucluster-firewall.service" in files[KUBELET_WANTS_FIREWALL_PATH]
    assert FIREWALL_RULES_PATH not in written("cp-1", spec(firewall=None))


def test_control_plane_nodes_follow_etcd_membership_and_workers_do_not() -> None:
    """Issue 41 item 2: etcd runs on control-plane nodes only; there the kubelet (etcd's static
    pod) brings the sync's timer, which runs it every 5 s (firewall.py says why)."""
    for node in ("cp-1", "cp-2"):
        files = written(node, spec())
        assert files[FIREWALL_SYNC_SCRIPT_PATH].startswith("#!/bin/sh")
        assert f"ExecStart={FIREWALL_SYNC_SCRIPT_PATH}" in files[FIREWALL_SYNC_UNIT_PATH]
        assert f"OnUnitActiveSec={SYNC_INTERVAL_S}s" in files[FIREWALL_SYNC_TIMER_PATH]
        assert "Wants=gpucluster-firewall-sync.timer" in files[KUBELET_WANTS_FIREWALL_SYNC_PATH]
    worker = written("gpu-1", spec())
    assert FIREWALL_SYNC_SCRIPT_PATH not in worker and KUBELET_WANTS_FIREWALL_SYNC_PATH not in worker
    assert FIREWALL_SYNC_SCRIPT_PATH not in written("cp-1", spec(firewall=None))


def test_the_protected_ssh_port_is_the_mpi_workers() -> None:
    assert MPI_SSH_PORT == SSH_PORT


@pytest.fixture(scope="module")
def nft() -> str:
    return require_program("nft", "/usr/sbin/nft", "nftables")


@pytest.mark.parametrize("admin", [(), ("172.20.0.0/16",)])
def test_nft_accepts_the_ruleset(nft: str, tmp_path: Path, admin: tuple[str, ...]) -> None:
    rules = tmp_path / "firewall.nft"
    rules.write_text(render_firewall(spec(), NodeFirewall(node_networks=[MANAGEMENT, RDMA], admin_networks=admin)))
    result = subprocess.run([nft, "-c", "-f", str(rules)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


# --- the ruleset in a network namespace -----------------------------------------------------------
# The connections a running cluster needs, for every stack shape and day-two moment, are the flow
# matrix's (tests/flows/test_flow_matrix.py); here one node, over IPv4 and IPv6: the cluster is
# IPv4, so every protected port must be closed over IPv6 too (a node's link-local or SLAAC address
# would otherwise reach etcd's peer port or the kubelet from anywhere on the segment).
NODE_ADDRESSES = ["10.10.0.50/24", "172.31.0.1/24"]
NODE_V6, PEER_V6 = "fd00:10::50", "fd00:10::51"
SSH, API = 22, 6443
PORTS = [ETCD_CLIENT_PORT, ETCD_PEER_PORT, KUBELET_PORT, MPI_SSH_PORT, RENDEZVOUS_PORT, API, SSH]
LISTENER = textwrap.dedent(
    """
    import selectors, socket, sys
    sel = selectors.DefaultSelector()
    for port in map(int, sys.argv[1:]):
        for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            s = socket.socket(family); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind((address, port)); s.listen(16); s.setblocking(False); sel.register(s, selectors.EVENT_READ)
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            conn, _ = key.fileobj.accept(); conn.close()
    """
)
PROBE = textwrap.dedent(
    """
    import socket, sys
    source, target = sys.argv[1], sys.argv[2]
    family = socket.AF_INET6 if ":" in target else socket.AF_INET
    for port in map(int, sys.argv[3:]):
        s = socket.socket(family); s.settimeout(1.0); s.bind((source, 0))
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
    """(node namespace, peer namespace) joined by a veth, IPv4 and IPv6 addresses on both (no
    duplicate address detection, so they answer at once), listeners on PORTS in the node over
    both. The peer holds addresses inside and outside the cluster's networks. No ruleset yet."""
    if os.geteuid() != 0:
        unavailable("network namespaces", "the test needs root (ip netns)")
    require_program("ip", "/usr/sbin/ip", "iproute2")
    node, peer = f"fw-node-{os.getpid()}", f"fw-peer-{os.getpid()}"
    try:
        _ip("netns", "add", node)
        _ip("netns", "add", peer)
    except subprocess.CalledProcessError as error:
        unavailable("network namespaces", error.stderr.strip())
    listener = None
    try:
        _ip("link", "add", "fw-n", "netns", node, "type", "veth", "peer", "name", "fw-p", "netns", peer)
        for address in NODE_ADDRESSES:
            _ip("-n", node, "addr", "add", address, "dev", "fw-n")
        for address in ("10.10.0.51/24", "10.10.0.99/24", "172.31.0.9/24"):
            _ip("-n", peer, "addr", "add", address, "dev", "fw-p")
        for ns, dev, v6 in ((node, "fw-n", NODE_V6), (peer, "fw-p", PEER_V6)):
            _ip("-n", ns, "addr", "add", f"{v6}/64", "dev", dev, "nodad")
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


def load(nft: str, node: str, firewall: NodeFirewall, tmp_path: Path) -> None:
    rules = tmp_path / "firewall.nft"
    rules.write_text(render_firewall(spec(), firewall))
    loaded = subprocess.run(["ip", "netns", "exec", node, nft, "-f", str(rules)], capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr


def reachable(peer: str, source: str, target: str) -> set[int]:
    result = subprocess.run(
        ["ip", "netns", "exec", peer, sys.executable, "-c", PROBE, source, target, *map(str, PORTS)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return {int(line.split()[0]) for line in result.stdout.splitlines() if line.endswith("open")}


def test_without_the_ruleset_every_port_answers_over_both_families(namespaces: tuple[str, str]) -> None:
    """The probe works: the ports the tests below find closed are closed by the ruleset."""
    _, peer = namespaces
    assert reachable(peer, "172.31.0.9", "172.31.0.1") == set(PORTS)
    assert reachable(peer, PEER_V6, NODE_V6) == set(PORTS)


def test_outside_the_cluster_only_unprotected_ports_answer(
    nft: str, namespaces: tuple[str, str], tmp_path: Path
) -> None:
    node, peer = namespaces
    load(nft, node, FIREWALL, tmp_path)
    # An address outside the management, RDMA and pod networks: etcd, kubelet, sshd, rendezvous
    # closed; the API server (no admin networks listed) and the node's own sshd (22) open.
    assert reachable(peer, "172.31.0.9", "172.31.0.1") == {API, SSH}


def test_every_protected_port_is_closed_over_ipv6(nft: str, namespaces: tuple[str, str], tmp_path: Path) -> None:
    node, peer = namespaces
    load(nft, node, FIREWALL, tmp_path)
    # The API server is left open when no admin networks are listed (it authenticates every request).
    assert reachable(peer, PEER_V6, NODE_V6) == {API, SSH}


def test_with_admin_networks_the_api_server_is_closed_over_ipv6_too(
    nft: str, namespaces: tuple[str, str], tmp_path: Path
) -> None:
    node, peer = namespaces
    load(nft, node, NodeFirewall(node_networks=[MANAGEMENT, RDMA], admin_networks=["172.20.0.0/16"]), tmp_path)
    assert reachable(peer, PEER_V6, NODE_V6) == {SSH}


def test_the_bootstrap_loads_the_firewall_before_kubeadm(tmp_path: Path) -> None:
    from tests.components.k8s.node_bootstrap.test_bootstrap_script_runs import make_node, make_spec

    node = make_node(tmp_path, "gpu-1", spec=make_spec(node_firewall=FIREWALL))
    run = node.boot()
    assert run.returncode == 0, run.output
    calls = node.calls
    started = calls.index("systemctl start gpucluster-firewall.service")
    assert started < next(i for i, call in enumerate(calls) if call.startswith("kubeadm"))
    without = make_node(tmp_path / "without", "gpu-1")
    without.boot()
    assert "systemctl start gpucluster-firewall.service" not in without.calls


def test_the_sync_leaves_the_control_plane_set_when_etcd_does_not_answer(
    namespaces: tuple[str, str], nft: str, tmp_path: Path
) -> None:
    """Never emptied: a member that cannot reach its own etcd (not started yet, no quorum) keeps
    the peers it had, or it would cut the very traffic that brings etcd back."""
    node, _ = namespaces
    load(nft, node, FIREWALL, tmp_path)
    script = tmp_path / "sync.sh"
    script.write_text(written("cp-1", spec())[FIREWALL_SYNC_SCRIPT_PATH])
    script.chmod(0o755)

    def members() -> str:
        listed = subprocess.run(
            ["ip", "netns", "exec", node, nft, "list", "set", "inet", "gpucluster", "control_plane"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return listed.stdout

    before = members()
    assert "10.10.0.50/31" in before  # cp-1 and cp-2, merged by nft into one interval
    run = subprocess.run(
        ["ip", "netns", "exec", node, str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "GPUCLUSTER_ETCD_ENDPOINT": "http://127.0.0.1:1", "GPUCLUSTER_NFT": nft},
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "did not answer; the control-plane set stays" in run.stderr
    assert members() == before
