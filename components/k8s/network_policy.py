"""NetworkPolicies of the add-ons' namespaces: who may open a connection to their pods.

Ingress only: each add-on still reaches what it needs (the API server, a registry), and an egress
policy would have to name the API server's addresses, which a NetworkPolicy sees after kube-proxy's
translation (the control-plane nodes' addresses, not the Service's). What the policies close is
the pod network's default, where any pod of any namespace may connect to any other. Host-network
pods (the RDMA device plugin, TCP training workers) are not selected by NetworkPolicies at all:
the nodes' firewall covers their ports (docs/security.md). `kubectl port-forward` and `exec` do
not pass through a pod's network policy (the runtime connects inside the pod's namespace).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def deny_all_ingress(namespace: str) -> dict[str, Any]:
    """No pod of `namespace` accepts a connection over the pod network."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "deny-all-ingress", "namespace": namespace},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }


def allow_ingress_on(
    namespace: str,
    name: str,
    *,
    pods: Mapping[str, str],
    port: int,
    sources: Sequence[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """`pods` of `namespace` accept connections on `port` (TCP) from `sources` (NetworkPolicy
    peers; None: from anywhere, the port alone), nothing else."""
    rule: dict[str, Any] = {"ports": [{"port": port, "protocol": "TCP"}]}
    if sources is not None:
        rule["from"] = [dict(source) for source in sources]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podSelector": {"matchLabels": dict(pods)}, "policyTypes": ["Ingress"], "ingress": [rule]},
    }


def pods_in(namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """A peer: the pods with `labels` in `namespace` (selected by its immutable name label)."""
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "podSelector": {"matchLabels": dict(labels)},
    }


def hosts(addresses: Sequence[str]) -> list[dict[str, Any]]:
    """Peers for node addresses (IPv4 or IPv6, each a single host)."""
    return [{"ipBlock": {"cidr": f"{a}/{128 if ':' in a else 32}"}} for a in addresses]
