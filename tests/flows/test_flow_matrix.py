"""Issue 41: every connection of docs/flows.yaml, for every stack shape and day-two moment.

For each shape (RoCE or TCP jobs; one or three control-plane nodes; with and without a load
balancer in front of the API and admin networks) and each moment (steady; a control-plane node
added; one replaced with a new address; workers added), the cluster is built in network namespaces
(tests/flows/network_lab.py): every node holds the nftables ruleset of *its own* first boot, read
from the user-data the stack renders for it (old nodes from the stack as it was, new ones from the
stack as it is), and every flow is a real connection through them. Flows to or from pods are also
judged by the stack's NetworkPolicies with upstream semantics (tests/flows/netpol.py). A needed
flow must pass both; a refused one must be refused by one of them.

The day-two moments that change the control plane run real etcd members in the control-plane
namespaces, joined as kubeadm joins them (the new node adds itself as a learner through an old
member's client port, its etcd starts, the learner is promoted), with the membership sync that the
control-plane nodes' user-data installs run on the old members at each change, as its timer would.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.flows.cluster import build
from tests.flows.etcd_members import run_membership
from tests.flows.netpol import Endpoint, allows
from tests.flows.network_lab import Lab, Probe
from tests.flows.shapes import DAY_TWO, MATRIX, OUTSIDE, POD_ROLES, STEADY, Shape, network_policies
from tests.real_parts import require_program, unavailable


# --- running the matrix ------------------------------------------------------------------------
def flows_for(shape: Shape, roles: Mapping[str, Endpoint]) -> list[dict[str, Any]]:
    return [f for f in MATRIX["flows"] if shape.matches(f.get("when", {})) and f["from"] in roles and f["to"] in roles]


@pytest.fixture(scope="module")
def nft() -> str:
    if os.geteuid() != 0:
        unavailable("network namespaces", "the flow matrix needs root (ip netns)")
    require_program("ip", "/usr/sbin/ip", "iproute2")
    require_program("curl", "/usr/bin/curl", "curl")  # the membership sync reads etcd with it
    return require_program("nft", "/usr/sbin/nft", "nftables")


@pytest.mark.parametrize("shape", STEADY + DAY_TWO, ids=lambda s: s.id)
def test_the_cluster_allows_what_it_needs_and_refuses_the_rest(lab: Lab, nft: str, shape: Shape, tmp_path: Path) -> None:
    cluster = build(lab, shape, tmp_path)
    etcd_nodes: set[str] = set()
    if cluster.moment.joined:
        run_membership(cluster, shape, nft, tmp_path)
        etcd_nodes = {n.name for n in cluster.moment.new.control_plane_nodes}
    flows = flows_for(shape, cluster.endpoints)
    listening: dict[str, tuple[set[int], set[int]]] = {}
    ipip: set[str] = set()
    for flow in flows:
        namespace = cluster.namespaces[flow["to"]]
        if flow["protocol"] == "ipip":
            ipip.add(namespace)
            continue
        node = cluster.endpoints[flow["to"]].node
        if node in etcd_nodes and not cluster.endpoints[flow["to"]].is_pod and flow["port"] in (2379, 2380):
            continue  # etcd itself answers there
        listening.setdefault(namespace, (set(), set()))[flow["protocol"] == "udp"].add(flow["port"])
    lab.listen(listening, ipip)
    probes = [
        Probe(
            namespace=cluster.namespaces[f["from"]],
            source=cluster.endpoints[f["from"]].address,
            target=cluster.endpoints[f["to"]].address,
            port=f["port"],
            protocol=f["protocol"],
        )
        for f in flows
    ]
    connected = lab.probe(probes)
    policies = network_policies(shape, cluster.moment.new)
    wrong = []
    for flow, data_path in zip(flows, connected, strict=True):
        source, destination = cluster.endpoints[flow["from"]], cluster.endpoints[flow["to"]]
        policy = allows(policies, source, destination, flow["port"], flow["protocol"])
        if (data_path and policy) != (flow["expect"] == "allow"):
            verdict = f"node firewalls {'pass' if data_path else 'drop'}, NetworkPolicies {'allow' if policy else 'refuse'}"
            wrong.append(
                f"{flow['id']} ({flow['from']} {source.address} -> {flow['to']} {destination.address}:"
                f"{flow['port']}/{flow['protocol']}) should {flow['expect']}: {verdict}"
            )
    assert not wrong, f"{shape.id}:\n" + "\n".join(wrong)


def test_every_shape_and_moment_of_the_issue_is_covered() -> None:
    shapes = STEADY + DAY_TWO
    assert {s.transport for s in shapes} == {"roce", "tcp"}
    assert {s.control_planes for s in STEADY} == {1, 3}
    assert {(s.load_balancer, s.admin_networks) for s in STEADY} == {(False, False), (True, True), (False, True), (True, False)}
    assert {s.moment for s in DAY_TWO} == {"control-plane-added", "control-plane-replaced", "workers-added"}
    every = {f["id"] for s in shapes for f in MATRIX["flows"] if s.matches(f.get("when", {}))}
    assert every == {f["id"] for f in MATRIX["flows"]}, "a flow no shape runs"


def test_the_matrix_is_well_formed() -> None:
    roles = set(MATRIX["roles"])
    for flow in MATRIX["flows"]:
        assert {"id", "from", "to", "port", "protocol", "expect", "why", "upstream"} <= set(flow), flow
        assert flow["from"] in roles and flow["to"] in roles, flow["id"]
        assert flow["protocol"] in ("tcp", "udp", "ipip") and flow["expect"] in ("allow", "refuse"), flow["id"]
    assert roles <= set(OUTSIDE) | set(POD_ROLES) | {
        "control-plane", "other-control-plane", "joined-control-plane", "worker", "other-worker",
        "worker-rdma", "other-worker-rdma", "added-worker",
    }  # fmt: skip


def test_a_shape_id_says_what_it_is() -> None:
    assert replace(STEADY[0], moment="workers-added").id == "roce-1cp-workers-added"
