"""The node's firewall: an nftables table that keeps the cluster's own ports to the cluster.

The bootstrap disables firewalld (it would fight Calico's rules), which left etcd, the kubelet and
the sshd of host-network (TCP) training workers reachable from the whole management network and
beyond. This table is the allow-list, laid down by cloud-init and loaded by its own unit
(`gpucluster-firewall.service`) before the kubelet starts (a kubelet drop-in wants it), on every
boot. What each port answers (docs/flows.md has every connection, with its upstream source):

- etcd's peer port (2380): the control-plane nodes only. On control-plane nodes the set follows
  etcd's own membership (`gpucluster-firewall-sync`, below), so a member added or replaced with a
  new address after this node's first boot is let in;
- etcd's client port (2379): the control-plane nodes, the management network (a joining
  control-plane node adds itself through it before it is a member, and the stack removes a
  departing member through it: `components/k8s/etcd/`) and the admin networks; never the pod
  network (below);
- the kubelet (10250): the node networks (management, RDMA) and the admin networks; not pods;
- the MPI workers' sshd on the host network (2222) and PyTorch's rendezvous (29500): the node
  networks, the pod network (a launcher pod reaches the workers' sshd from a pod address) and the
  admin networks;
- the API server (6443): left open unless admin networks are listed, then the node, pod and admin
  networks and the load balancer's sources (its source NAT and health checks);
- NodePorts (30000-32767, TCP and UDP): the node, pod and admin networks and the load balancer's
  sources, filtered before kube-proxy's translation (prerouting, ahead of `dstnat`): after it the
  packet carries the backend's port, not the NodePort. Only new connections: Calico masquerades
  a pod's connection to an address outside every IP pool with `MASQUERADE --random-fully`
  (felix/rules/nat.go `NATOutgoingChain`, `MasqAction`; felix/environment/feature_detect.go turns
  `MASQFullyRandom` on for iptables >= 1.6.2 and kernel >= 3.14, so on Rocky 9), which picks the
  node's source port from 1024-65535; about 4 % of those land in 30000-32767, and their replies
  reach this chain addressed to the node, before conntrack's un-NAT (dstnat, -100). conntrack
  (priority -200) has already marked them established, so they pass (issue 51 item 1).

Pods: with Calico's `natOutgoing` a pod's connection to another node leaves its own node with the
node's address, so the destination cannot tell a pod from a node. The table's forward chain drops
it where it still has the pod's address, on its own node: pods never reach etcd or a kubelet, and
never the RDMA subnets (the ESXi hosts' PVRDMA vmknics trust that subnet, and a pod's connection
would arrive there from the node's RDMA address).

Why nftables and not Calico host endpoints: the table is in place before the kubelet and etcd
start, with no dependency on the CNI being up (a host endpoint exists only once calico-node runs,
and is a cluster object someone with write access to Calico's CRDs can change); and it only drops
what it names, in its own table, so it cannot lock a node out the way an auto host endpoint's
default deny can. A packet must pass every base chain on a hook, so Calico's own tables keep
working beside it. IPv6 to the protected ports is dropped (the cluster is IPv4).

Membership: the one set that changes with the cluster is `control_plane`. A host endpoint with a
GlobalNetworkPolicy would follow node labels from the API, but only once the CNI runs, and a
joining member needs 2380 at a moment when it has no Node object with the control-plane label yet
(kubeadm marks the node after its etcd joined). etcd's member list already holds the new peer's
address the moment `kubeadm join` adds it (`MemberAdd`, before the new etcd starts), so a small
local sync reads it: `gpucluster-firewall-sync.timer` on control-plane nodes asks the local member
(`/v3/cluster/member/list` through etcd's gRPC gateway, with kubeadm's etcd health-check client
certificate) every few seconds and swaps the set's elements in one nft transaction; when etcd does
not answer it leaves the set as it is.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from components.k8s.node_bootstrap.spec import ClusterSpec, NodeFirewall

ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
KUBELET_PORT = 10250
MPI_SSH_PORT = 2222
"""The MPI workers' sshd (`components/k8s/jobs/mpijob.py` SSH_PORT; a test keeps them equal)."""
RENDEZVOUS_PORT = 29500
"""torchrun's c10d rendezvous on worker 0 (host network over TCP)."""
TABLE = "gpucluster"


def _set(elements: Sequence[str]) -> str:
    return "{ " + ", ".join(dict.fromkeys(elements)) + " }"


def _networks(addresses: Sequence[str]) -> str:
    """An interval set's elements: nft refuses overlapping intervals, so networks that contain
    others (a node's address inside the management subnet) are merged first."""
    networks = [ipaddress.ip_network(a, strict=False) for a in addresses]
    v4 = [n for n in networks if isinstance(n, ipaddress.IPv4Network)]
    return _set([str(n) for n in ipaddress.collapse_addresses(v4)])


NODE_PORTS = "30000-32767"
"""kube-apiserver's default `--service-node-port-range` (kubeadm leaves it)."""
SYNC_INTERVAL_S = 5
"""How often a control-plane node reads etcd's member list (`gpucluster-firewall-sync.timer`)."""


def _rule_set(name: str, elements: str) -> list[str]:
    return [f"  set {name} {{", "    type ipv4_addr; flags interval", f"    elements = {elements}", "  }"]


def render_firewall(spec: ClusterSpec, firewall: NodeFirewall) -> str:
    """The nftables ruleset (`nft -f`): replaces the table atomically, so it can be loaded again."""
    control_plane = [node.management_ip for node in spec.control_plane_nodes]
    nodes = list(firewall.node_networks)
    admin = list(firewall.admin_networks)
    cluster = [*nodes, spec.pod_cidr, *admin]
    front = [*cluster, *firewall.load_balancer_sources]
    etcd_clients = [*control_plane, *nodes[:1], *admin]
    job_ports = [MPI_SSH_PORT, RENDEZVOUS_PORT]
    protected = [ETCD_CLIENT_PORT, ETCD_PEER_PORT, KUBELET_PORT, *job_ports]
    pod_refused = _set([str(p) for p in (ETCD_CLIENT_PORT, ETCD_PEER_PORT, KUBELET_PORT)])
    lines = [
        "# vsphere-gpu-cluster: the node's own ports, for the cluster only (components/k8s/node_bootstrap/firewall.py).",
        f"table inet {TABLE}",
        f"delete table inet {TABLE}",
        f"table inet {TABLE} {{",
        *_rule_set("control_plane", _networks(control_plane)),
        *_rule_set("etcd_clients", _networks(etcd_clients)),
        *_rule_set("nodes", _networks(nodes)),
        *_rule_set("kubelet_clients", _networks([*nodes, *admin])),
        *_rule_set("cluster", _networks(cluster)),
        *_rule_set("front", _networks(front)),
        "  chain input {",
        "    type filter hook input priority filter; policy accept;",
        '    iif "lo" accept',
        f"    tcp dport {ETCD_PEER_PORT} ip saddr != @control_plane drop",
        f"    tcp dport {ETCD_CLIENT_PORT} ip saddr @control_plane accept",
        f"    tcp dport {ETCD_CLIENT_PORT} ip saddr != @etcd_clients drop",
        f"    tcp dport {KUBELET_PORT} ip saddr != @kubelet_clients drop",
        f"    tcp dport {_set([str(p) for p in job_ports])} ip saddr != @cluster drop",
    ]
    if admin:
        protected.append(spec.api_server_port)
        lines.append(f"    tcp dport {spec.api_server_port} ip saddr != @front drop")
    lines += [
        f"    meta nfproto ipv6 tcp dport {_set([str(p) for p in protected])} drop",
        "  }",
        "  chain node_ports {",
        "    # Before kube-proxy's DNAT (dstnat, -100): after it the port is the backend's.",
        "    type filter hook prerouting priority mangle; policy accept;",
        "    # Replies to the node's masqueraded pod connections come back to a random node port,",
        "    # this range included, before their un-NAT (see the module's docstring): only a new",
        "    # connection is a NodePort's.",
        "    ct state established,related accept",
        f"    fib daddr type local meta l4proto {{ tcp, udp }} th dport {NODE_PORTS} ip saddr != @front drop",
        f"    fib daddr type local meta nfproto ipv6 meta l4proto {{ tcp, udp }} th dport {NODE_PORTS} drop",
        "  }",
        "  chain pods {",
        "    # A pod's connection still has its pod address here; natOutgoing rewrites it after.",
        "    type filter hook forward priority filter; policy accept;",
    ]
    if firewall.rdma_networks:
        lines.append(f"    ip saddr {spec.pod_cidr} ip daddr {_networks(firewall.rdma_networks)} drop")
    lines += [
        f"    ip saddr {spec.pod_cidr} ip daddr @nodes tcp dport {pod_refused} drop",
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"

