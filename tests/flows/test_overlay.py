"""Issue 51 item 2: the overlay shape, and why validate refuses it.

Two nodes in different subnets with Calico's VXLAN between them, wired as felix wires it
(felix/dataplane/linux/vxlan_mgr.go: the `vxlan.calico` device with the node's VTEP MAC, VNI and
port (FelixConfiguration's defaults 4096 and 4789), its parent device and address, learning off,
the node's tunnel address from its pod block on the device, and each remote pod block routed via
that node's tunnel address (`TargetTypeVXLAN`, on-link); felix/vxlanfdb: per remote node a
neighbour entry for its tunnel address and a forwarding-database entry to its node address). A node's connection to a pod behind
the other node then leaves from `vxlan.calico`, so the kernel gives it the tunnel address (the
output device's address, net/ipv4/route.c `inet_select_addr`), and the pod sees a pod address where
the stack's NetworkPolicies expect a node's (projectcalico/calico#3665, #1987): `verify`'s pod
proxy to the dcgm-exporter and Open MPI's daemons calling `mpirun` back are refused. The stack
never builds this shape (`validate` keeps every node in `managementNetwork.subnet`, so the pool's
`VXLANCrossSubnet` never tunnels); the last test holds that refusal and its message.

The node firewall is not loaded here: it filters node ports, not a node's own connections to pods,
and the flow matrix runs it for every shape the stack builds.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest

from components.k8s.addons.dcgm_exporter import METRICS_PORT
from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, InvalidEnvironment, load_environment
from tests.flows.netpol import Endpoint, allows
from tests.flows.network_lab import Lab, Probe
from tests.flows.shapes import POD_POOL, POD_ROLES, Shape, moment_for, network_policies
from tests.real_parts import require_program, unavailable
from tests.stack_fixtures import fixture_view

NODES = {  # name -> (node address/prefix, its pod block, its tunnel address, its VTEP MAC)
    "cp-1": ("10.10.0.11/24", "10.244.1.0/24", "10.244.1.1", "66:00:00:00:00:01"),
    "gpu-1": ("10.10.1.51/24", "10.244.2.0/24", "10.244.2.1", "66:00:00:00:00:02"),
}
"""Two subnets: with `VXLANCrossSubnet` Calico tunnels between them."""
ANY = "0.0.0.0"
VNI, VXLAN_PORT = 4096, 4789
"""felix's defaults (FelixConfiguration `vxlanVNI`, `vxlanPort`)."""


@pytest.fixture(scope="module")
def nft() -> str:
    if os.geteuid() != 0:
        unavailable("network namespaces", "the flow lab needs root (ip netns)")
    require_program("ip", "/usr/sbin/ip", "iproute2")
    require_program("bridge", "/usr/sbin/bridge", "iproute2")
    return require_program("nft", "/usr/sbin/nft", "nftables")


def _overlay(lab: Lab) -> dict[str, str]:
    namespaces = {name: lab.node(name, address, None, POD_POOL) for name, (address, *_) in NODES.items()}
    for name, (address, _, tunnel, mac) in NODES.items():
        here = namespaces[name]
        lab.ip(here, "link", "add", "vxlan.calico", "address", mac, "type", "vxlan", "id", str(VNI),
               "local", address.split("/")[0], "dev", "eth0", "dstport", str(VXLAN_PORT), "nolearning")  # fmt: skip
        lab.ip(here, "addr", "add", f"{tunnel}/32", "dev", "vxlan.calico")
        lab.ip(here, "link", "set", "vxlan.calico", "up")
        for other, (_, other_block, other_tunnel, other_mac) in NODES.items():
            if other != name:
                lab.ip(
                    here, "neigh", "add", other_tunnel, "lladdr", other_mac, "dev", "vxlan.calico", "nud", "permanent"
                )
                lab.ip(here, "route", "add", other_block, "via", other_tunnel, "dev", "vxlan.calico", "onlink")
    return namespaces


def _fdb(lab: Lab, namespaces: dict[str, str]) -> None:
    """The forwarding-database entries (bridge(8); `ip -batch` has no `fdb`), once the links exist."""
    for name in NODES:
        for other, (other_address, _, _, other_mac) in NODES.items():
            if other != name:
                lab.exec(namespaces[name], "bridge", "fdb", "append", other_mac, "dev", "vxlan.calico",
                         "dst", other_address.split("/")[0])  # fmt: skip


@pytest.mark.parametrize("transport", ["roce", "tcp"])
def test_through_the_tunnel_a_node_reaches_pods_from_a_pod_address_the_policies_refuse(
    lab: Lab, transport: str
) -> None:
    namespaces = _overlay(lab)
    exporter = "10.244.2.12"
    launcher = "10.244.1.10"
    _, _, exporter_namespace, exporter_labels = POD_ROLES["exporter-pod"]
    _, _, jobs_namespace, launcher_labels = POD_ROLES["launcher-pod"]
    pods = {
        "exporter": lab.pod("exporter", namespaces["gpu-1"], exporter),
        "launcher": lab.pod("launcher", namespaces["cp-1"], launcher),
    }
    lab.flush()
    _fdb(lab, namespaces)
    listeners = lab.listen({pods["exporter"]: ({METRICS_PORT}, set()), pods["launcher"]: ({40000}, set())})
    connected = lab.probe(
        [
            # Neither binds its source: the route picks it, as for the API server's pod proxy and
            # a daemon on a host-network worker.
            Probe(namespaces["cp-1"], ANY, exporter, METRICS_PORT),
            Probe(namespaces["gpu-1"], ANY, launcher, 40000),
        ]
    )
    assert connected == [True, True], "the lab's tunnel does not carry the nodes' connections"
    seen = dict(listeners.wait_accepted(2))
    assert seen == {METRICS_PORT: NODES["cp-1"][2], 40000: NODES["gpu-1"][2]}, seen

    # The stack's own policies for a stack whose nodes are these (control plane at cp-1's address).
    moment = moment_for(Shape(transport, 1, False, False))
    policies = network_policies(Shape(transport, 1, False, False), moment.new)
    target = Endpoint(address=exporter, node="gpu-1", namespace=exporter_namespace, labels=exporter_labels)
    from_node = Endpoint(address="10.10.0.11", node="cp-1")
    from_tunnel = Endpoint(address=seen[METRICS_PORT], node="cp-1")
    assert allows(policies, from_node, target, METRICS_PORT)
    assert not allows(policies, from_tunnel, target, METRICS_PORT), "the exporter's policy admits a tunnel address"
    if transport == "tcp":
        mpirun = Endpoint(address=launcher, node="cp-1", namespace=jobs_namespace, labels=launcher_labels)
        assert allows(policies, Endpoint(address="10.10.0.51", node="gpu-1"), mpirun, 40000)
        assert not allows(policies, Endpoint(address=seen[40000], node="gpu-1"), mpirun, 40000)


def test_validate_refuses_the_shape_naming_the_node_and_the_subnet() -> None:
    view = fixture_view("dev")
    values: dict[str, Any] = copy.deepcopy(dict(view.values))
    node = values[ENVIRONMENT_KEY]["gpuWorkers"]["nodes"][0]
    node["managementIp"] = "10.10.1.51"  # a second subnet: Calico would tunnel to this node
    with pytest.raises(InvalidEnvironment) as raised:
        load_environment(ConfigView(values=values, secret_keys=view.secret_keys))
    [line] = [p for p in raised.value.problems if "managementIp" in p]
    assert (
        f"gpuWorkers.nodes[{node['name']}].managementIp: 10.10.1.51 is not a host address of managementNetwork.subnet"
        in line
    )
