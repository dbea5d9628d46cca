"""The NetworkPolicy evaluator of the flow matrix against the documentation's own cases
(kubernetes.io/docs/concepts/services-networking/network-policies): a wrong evaluator would let
the matrix pass on a policy that Calico enforces differently."""

from __future__ import annotations

from typing import Any

from tests.flows.netpol import Endpoint, allows

DB = Endpoint(address="10.244.1.10", node="n1", namespace="default", labels={"role": "db"})
FRONTEND = Endpoint(address="10.244.2.10", node="n2", namespace="default", labels={"role": "frontend"})
OTHER_NS = Endpoint(address="10.244.2.11", node="n2", namespace="myproject", labels={"role": "x"})
NODE_1 = Endpoint(address="10.10.0.1", node="n1")
NODE_2 = Endpoint(address="10.10.0.2", node="n2")
OUTSIDE = Endpoint(address="172.17.1.5", node="elsewhere")


def policy(spec: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {"kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": namespace}, "spec": spec}


# The documentation's test-network-policy, ingress half.
EXAMPLE = policy(
    {
        "podSelector": {"matchLabels": {"role": "db"}},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [
                    {"ipBlock": {"cidr": "172.17.0.0/16", "except": ["172.17.1.0/24"]}},
                    {"namespaceSelector": {"matchLabels": {"project": "myproject"}}},
                    {"podSelector": {"matchLabels": {"role": "frontend"}}},
                ],
                "ports": [{"protocol": "TCP", "port": 6379}],
            }
        ],
    }
)
NAMESPACES = {"myproject": {"project": "myproject"}}


def test_the_documented_example() -> None:
    assert allows([EXAMPLE], FRONTEND, DB, 6379, namespaces=NAMESPACES)
    assert allows([EXAMPLE], OTHER_NS, DB, 6379, namespaces=NAMESPACES)
    assert not allows([EXAMPLE], OTHER_NS, DB, 6379)  # the namespace lacks the label
    assert not allows([EXAMPLE], FRONTEND, DB, 6380, namespaces=NAMESPACES)
    assert not allows([EXAMPLE], FRONTEND, DB, 6379, "udp", namespaces=NAMESPACES)
    assert not allows([EXAMPLE], OUTSIDE, DB, 6379)  # in the except range
    assert allows([EXAMPLE], Endpoint(address="172.17.0.9", node="x"), DB, 6379)
    assert allows([EXAMPLE], OUTSIDE, FRONTEND, 80)  # not selected: not isolated


def test_host_network_traffic_is_the_nodes() -> None:
    """Selectors never match a node (or a host-network pod); its own node always reaches a pod."""
    deny = policy({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]})
    assert not allows([deny], NODE_2, DB, 22)
    assert allows([deny], NODE_1, DB, 22)
    by_block = policy({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.10.0.0/24"}}]}]})
    assert allows([by_block], NODE_2, DB, 22)
    everyone = policy({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {}}]}]})
    assert not allows([everyone], NODE_2, DB, 22) and allows([everyone], OTHER_NS, DB, 22)


def test_egress_isolation_and_port_ranges() -> None:
    egress = policy(
        {
            "podSelector": {"matchExpressions": [{"key": "role", "operator": "In", "values": ["frontend"]}]},
            "egress": [{"to": [{"ipBlock": {"cidr": "10.244.0.0/16"}}], "ports": [{"port": 32000, "endPort": 32768}]}],
        }
    )
    assert allows([egress], FRONTEND, DB, 32100)
    assert not allows([egress], FRONTEND, DB, 31999)
    assert not allows([egress], FRONTEND, OUTSIDE, 32100)
    assert allows([egress], FRONTEND, NODE_2, 22)  # its own node
    assert allows([egress], DB, OUTSIDE, 1)  # not selected by the expression
