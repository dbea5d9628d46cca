"""The node's firewall: an nftables table that keeps the cluster's own ports to the cluster.

The bootstrap disables firewalld (it would fight Calico's rules), which left etcd, the kubelet and
the sshd of host-network (TCP) training workers reachable from the whole management network and
beyond. This table is the allow-list, laid down by cloud-init and loaded by its own unit
(`gpucluster-firewall.service`) before the kubelet starts (a kubelet drop-in wants it), on every
boot:

- etcd's peer port (2380): the control-plane nodes only;
- etcd's client port (2379): the control-plane nodes, the management network (the stack removes a
  departing member through it: `components/k8s/etcd_member.py`) and the admin networks;
- the kubelet (10250), the MPI workers' sshd on the host network (2222) and PyTorch's rendezvous
  (29500): the node networks (management, RDMA), the pod network (a launcher pod reaches the
  workers' sshd from a pod address) and the admin networks;
- the API server (6443): left open unless admin networks are listed, then the node, pod and admin
  networks: kubectl and Pulumi reach it from wherever operators work, and it authenticates every
  request.

Why nftables and not Calico host endpoints: the table is in place before the kubelet and etcd
start, with no dependency on the CNI being up (a host endpoint exists only once calico-node runs,
and is a cluster object someone with write access to Calico's CRDs can change); and it only drops
what it names, in its own table, so it cannot lock a node out the way an auto host endpoint's
default deny can. A packet must pass every base chain on the input hook, so Calico's own tables
keep working beside it. IPv6 to the protected ports is dropped (the cluster is IPv4).
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


def render_firewall(spec: ClusterSpec, firewall: NodeFirewall) -> str:
    """The nftables ruleset (`nft -f`): replaces the table atomically, so it can be loaded again."""
    control_plane = [node.management_ip for node in spec.control_plane_nodes]
    cluster = [*firewall.node_networks, spec.pod_cidr, *firewall.admin_networks]
    etcd_clients = [*control_plane, *firewall.node_networks[:1], *firewall.admin_networks]
    cluster_ports = [KUBELET_PORT, MPI_SSH_PORT, RENDEZVOUS_PORT]
    protected = [ETCD_CLIENT_PORT, ETCD_PEER_PORT, *cluster_ports]
    lines = [
        "# vsphere-gpu-cluster: the node's own ports, for the cluster only (components/k8s/node_bootstrap/firewall.py).",
        f"table inet {TABLE}",
        f"delete table inet {TABLE}",
        f"table inet {TABLE} {{",
        "  set control_plane {",
        "    type ipv4_addr; flags interval",
        f"    elements = {_networks(control_plane)}",
        "  }",
        "  set etcd_clients {",
        "    type ipv4_addr; flags interval",
        f"    elements = {_networks(etcd_clients)}",
        "  }",
        "  set cluster {",
        "    type ipv4_addr; flags interval",
        f"    elements = {_networks(cluster)}",
        "  }",
        "  chain input {",
        "    type filter hook input priority filter; policy accept;",
        '    iif "lo" accept',
        f"    tcp dport {ETCD_PEER_PORT} ip saddr != @control_plane drop",
        f"    tcp dport {ETCD_CLIENT_PORT} ip saddr != @etcd_clients drop",
        f"    tcp dport {_set([str(p) for p in cluster_ports])} ip saddr != @cluster drop",
    ]
    if firewall.admin_networks:
        protected.append(spec.api_server_port)
        lines.append(f"    tcp dport {spec.api_server_port} ip saddr != @cluster drop")
    lines += [
        f"    meta nfproto ipv6 tcp dport {_set([str(p) for p in protected])} drop",
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"
