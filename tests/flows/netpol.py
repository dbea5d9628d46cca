"""Kubernetes NetworkPolicy (networking.k8s.io/v1) judged from rendered objects.

No maintained evaluator exists in a registry reachable here (PyPI has generators and linters:
kube-netpol, netpolymigrator), so this follows the documentation itself,
kubernetes.io/docs/concepts/services-networking/network-policies:

- "The two sorts of pod isolation": a pod is isolated for ingress (egress) when some policy of its
  namespace selects it and lists `Ingress` (`Egress`) in `policyTypes`; `policyTypes` defaults to
  `Ingress`, plus `Egress` when the policy has egress rules. A pod no such policy selects allows
  everything in that direction.
- Policies are additive: a connection is allowed in a direction when any rule of any policy that
  isolates the pod matches it; "for a connection from a source pod to a destination pod to be
  allowed, both the egress policy on the source pod and the ingress policy on the destination pod
  need to allow the connection".
- Peers: `podSelector` alone selects pods of the policy's namespace, `namespaceSelector` alone all
  pods of the selected namespaces, both together pods of those namespaces; `ipBlock` a CIDR less its
  `except` ranges (Calico matches pod addresses against it too). An omitted `from`/`to` or `ports`
  matches everything; an empty selector selects everything; `matchExpressions` with In, NotIn,
  Exists, DoesNotExist; a port with `endPort` is a range; `protocol` defaults to TCP.
- "Traffic to and from the node where a Pod is running is always allowed, regardless of the IP
  address of the Pod or the node."
- "NetworkPolicy and hostNetwork pods": where the plugin cannot tell a host-network pod's traffic
  from its node's (Calico), "hostNetwork pods are ignored by podSelector and namespaceSelector" and
  their traffic "is treated the same as all other traffic to/from the node IP". So a host-network
  endpoint here is its node: never selected, matched by `ipBlock` on the node's address only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Endpoint:
    """One end of a connection as NetworkPolicy sees it."""

    address: str
    """The address the connection carries at the policy (a node's for host-network traffic)."""
    node: str
    """The node it runs on (or is)."""
    namespace: str | None = None
    """The pod's namespace; None for a node, a host-network pod or a machine outside the cluster."""
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_pod(self) -> bool:
        return self.namespace is not None


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A LabelSelector (`matchLabels` and `matchExpressions`) against `labels`."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _namespace_labels(namespace: str, namespaces: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    # The API server sets kubernetes.io/metadata.name on every namespace (immutable, since 1.22).
    return {**namespaces.get(namespace, {}), "kubernetes.io/metadata.name": namespace}


def _peer_matches(
    peer: Mapping[str, Any], other: Endpoint, policy_namespace: str, namespaces: Mapping[str, Mapping[str, str]]
) -> bool:
    if "ipBlock" in peer:
        address = ipaddress.ip_address(other.address)
        block = peer["ipBlock"]
        if address not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(address in ipaddress.ip_network(e) for e in block.get("except") or [])
    if not other.is_pod:  # a node or host-network pod: ignored by pod and namespace selectors
        return False
    assert other.namespace is not None
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], _namespace_labels(other.namespace, namespaces)):
            return False
    elif other.namespace != policy_namespace:
        return False
    return selects(peer.get("podSelector") or {}, other.labels)


def _port_matches(ports: Sequence[Mapping[str, Any]] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    for entry in ports:
        if entry.get("protocol", "TCP") != protocol.upper():
            continue
        if "port" not in entry:
            return True
        first = entry["port"]
        if not isinstance(first, int):
            raise ValueError(f"named port {first!r}: the flow matrix uses numbers only")
        if first <= port <= entry.get("endPort", first):
            return True
    return False


def _policy_types(spec: Mapping[str, Any]) -> list[str]:
    if "policyTypes" in spec:
        return list(spec["policyTypes"])
    return ["Ingress", *(["Egress"] if "egress" in spec else [])]


def _direction_allows(
    policies: Sequence[Mapping[str, Any]],
    pod: Endpoint,
    other: Endpoint,
    port: int,
    protocol: str,
    direction: str,
    namespaces: Mapping[str, Mapping[str, str]],
) -> bool:
    kind, rules_key, peers_key = (
        ("Ingress", "ingress", "from") if direction == "ingress" else ("Egress", "egress", "to")
    )
    isolating = [
        p
        for p in policies
        if p["metadata"]["namespace"] == pod.namespace
        and kind in _policy_types(p["spec"])
        and selects(p["spec"].get("podSelector") or {}, pod.labels)
    ]
    if not isolating:
        return True
    for policy in isolating:
        for rule in policy["spec"].get(rules_key) or []:
            if not _port_matches(rule.get("ports"), port, protocol):
                continue
            peers = rule.get(peers_key)
            if not peers or any(_peer_matches(p, other, policy["metadata"]["namespace"], namespaces) for p in peers):
                return True
    return False


def allows(
    objects: Sequence[Mapping[str, Any]],
    source: Endpoint,
    destination: Endpoint,
    port: int,
    protocol: str = "tcp",
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
) -> bool:
    """Whether the NetworkPolicies among `objects` let `source` open `port` on `destination`."""
    policies = [o for o in objects if o.get("kind") == "NetworkPolicy"]
    labels = namespaces or {}
    # Traffic between a pod and its own node is always allowed, in both directions.
    from_own_node = not source.is_pod and source.node == destination.node
    to_own_node = not destination.is_pod and destination.node == source.node
    if (
        destination.is_pod
        and not from_own_node
        and not _direction_allows(policies, destination, source, port, protocol, "ingress", labels)
    ):
        return False
    return not (source.is_pod and not to_own_node) or _direction_allows(
        policies, source, destination, port, protocol, "egress", labels
    )
