"""The flow matrix's cluster in network namespaces (tests/flows/network_lab.py): every node with the
ruleset of its own first boot, Calico's routes, the outside machines and the pods."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from components.k8s.node_bootstrap.paths import FIREWALL_RULES_PATH, FIREWALL_SYNC_SCRIPT_PATH
from tests.flows.netpol import Endpoint
from tests.flows.network_lab import Lab, write
from tests.flows.shapes import (
    OUTSIDE,
    POD_POOL,
    POD_ROLES,
    Moment,
    Shape,
    first_boot_files,
    moment_for,
    node_address,
    rdma_of,
)


# --- the cluster in namespaces -----------------------------------------------------------------
@dataclass
class Cluster:
    lab: Lab
    moment: Moment
    namespaces: dict[str, str]
    """Node name or machine/pod role -> namespace."""
    endpoints: dict[str, Endpoint]
    """Flow role -> who it is to NetworkPolicy (and its address)."""
    sync_scripts: dict[str, Path]
    """Control-plane node -> the membership sync its user-data installs (absent: none)."""


def build(lab: Lab, shape: Shape, tmp: Path) -> Cluster:
    moment = moment_for(shape)
    nodes = {n.name: n for n in moment.new.all_nodes}
    # A removed node is there (as `<name>-old`) until its member is removed, then goes.
    keys = sorted([*nodes, *(f"{name}-old" for name in moment.removed)])
    block_of = {key: f"10.244.{i}" for i, key in enumerate(keys, start=1)}
    namespaces: dict[str, str] = {}
    sync_scripts: dict[str, Path] = {}
    for name in moment.booted:
        namespaces[name] = lab.node(name, f"{node_address(moment, name)}/24", rdma_of(nodes[name]), POD_POOL)
    for name in moment.removed:
        old_node = next(n for n in moment.old.all_nodes if n.name == name)
        namespaces[f"{name}-old"] = lab.node(f"{name}-old", f"{old_node.management_ip}/24", None, POD_POOL)
    for key, namespace in namespaces.items():
        name = key.removesuffix("-old")
        spec = moment.old if key.endswith("-old") else moment.booted[name]
        files = first_boot_files(spec, name)
        lab.load(namespace, files[FIREWALL_RULES_PATH])
        if FIREWALL_SYNC_SCRIPT_PATH in files and not key.endswith("-old"):
            sync_scripts[name] = write(tmp / f"sync-{name}.sh", files[FIREWALL_SYNC_SCRIPT_PATH], 0o755)
    # Calico's routes: every other node's pod block via its management address.
    present = {key: node_address(moment, key.removesuffix("-old"), old=key.endswith("-old")) for key in namespaces}
    for key, namespace in namespaces.items():
        for other, address in present.items():
            if other != key:
                lab.ip(namespace, "route", "add", f"{block_of[other]}.0/24", "via", address)
    endpoints: dict[str, Endpoint] = {}
    for role, name in moment.roles.items():
        address = nodes[name].rdma_ip if role.endswith("-rdma") else node_address(moment, name)
        assert address is not None
        endpoints[role] = Endpoint(address=address, node=name)
        namespaces.setdefault(role, namespaces[name])
    for role, (segment, address) in OUTSIDE.items():
        kind = {"management": {"management": [address]}, "rdma": {"rdma": [address]}}[segment]
        namespaces[role] = lab.machine(role, **kind)
        endpoints[role] = Endpoint(address=address.split("/")[0], node=role)
    for role, (node, octet, namespace_name, labels) in POD_ROLES.items():
        address = f"{block_of[node]}.{octet}"
        namespaces[role] = lab.pod(role, namespaces[node], address)
        endpoints[role] = Endpoint(address=address, node=node, namespace=namespace_name, labels=labels)
    lab.flush()
    return Cluster(lab, moment, namespaces, endpoints, sync_scripts)
