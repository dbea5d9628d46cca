"""Issue 51 item 2: a node must reach pods from its own address, never from a tunnel address.

With an overlay between two nodes, Calico routes a node's packets for the other node's pods out of
its tunnel device (vxlan.calico, tunl0), so the kernel gives them the tunnel's address, which
Calico allocates from the pod pool (projectcalico/calico#3665, #1987). The stack's NetworkPolicies
admit nodes by their addresses (the dcgm-exporter: the API servers' /32s, for `verify`'s pod
proxy; the TCP jobs: the node networks, for Open MPI's daemons calling `mpirun` back), so a pool
that always encapsulates (`VXLAN`, `IPIP`) would refuse them. The cross-subnet modes encapsulate
only between nodes of different subnets, and the stack's validate keeps every node in
`managementNetwork.subnet` (`stacks/environment/rules/general.py`, tests/stacks/tools/validate/
test_validate_hints.py), so no node pair ever takes the tunnel."""

from __future__ import annotations

import ipaddress

import pytest

from components.k8s.node_bootstrap import ClusterSpec
from components.k8s.node_bootstrap.spec import CalicoSettings
from stacks.environment.cluster_spec import cluster_spec
from stacks.environment.loader import load_environment
from tests.components.k8s.node_bootstrap.cluster_settings import cluster_settings
from tests.stack_fixtures import fixture_view


@pytest.mark.parametrize("mode", ["VXLAN", "IPIP"])
def test_a_pool_that_always_encapsulates_is_refused_naming_the_field(mode: str) -> None:
    with pytest.raises(ValueError) as info:
        ClusterSpec(**cluster_settings(calico=CalicoSettings(encapsulation=mode)))  # type: ignore[arg-type]
    text = str(info.value)
    assert f"calico.encapsulation: {mode!r}" in text
    assert "tunnel address" in text and f"'{mode}CrossSubnet'" in text


@pytest.mark.parametrize("mode", ["VXLANCrossSubnet", "IPIPCrossSubnet", "None"])
def test_modes_that_keep_one_subnet_direct_are_accepted(mode: str) -> None:
    spec = ClusterSpec(**cluster_settings(calico=CalicoSettings(encapsulation=mode)))  # type: ignore[arg-type]
    assert spec.calico.encapsulation == mode


def test_the_stack_builds_a_cross_subnet_pool_with_every_node_in_one_subnet() -> None:
    """What the stack renders: the cross-subnet pool (no stack key changes it) and every node's
    Calico address (its kubelet node-ip, the management address) inside one subnet, the one its
    NIC is configured with (components/vsphere/first_boot.py: `managementNetwork.subnet`'s prefix),
    so Calico sees every pair of nodes as one subnet and routes between them directly."""
    env = load_environment(fixture_view("dev"))
    spec = cluster_spec(env, ClusterSpec)
    assert spec.calico.encapsulation == "VXLANCrossSubnet"
    subnet = ipaddress.ip_network(env.management_network.subnet)
    assert all(ipaddress.ip_address(node.management_ip) in subnet for node in spec.all_nodes)
