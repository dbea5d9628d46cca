"""Rules for the Kubernetes layer: what kubeadm, kube-apiserver, kube-controller-manager or the
node bootstrap would refuse or break on, checked before any resource is registered.

Each mirrors (and cites) the check a component asserts or the behaviour of the real machine, so a
stack that passes `validate` never stops `plan` or `pulumi up` half way.
"""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Network

from components.k8s.facts import DNS_LABEL
from stacks.environment.cluster_spec import CLUSTER_NAME_SUFFIX, cluster_name
from stacks.environment.model import Environment
from stacks.environment.registry import Problem, rule

"""The cluster is named `<vm.namePrefix>-k8s` (stacks/wiring/kubernetes.py `cluster_name`)."""

MAX_SERVICE_PREFIX_LENGTH_LARGEST = 12
"""kube-apiserver refuses an IPv4 service range larger than /12 (at most 2^20 addresses:
`--service-cluster-ip-range`, pkg/controlplane/apiserver/options/validation.go)."""

CLUSTER_DNS_INDEX = 10
"""kubeadm gives the cluster DNS Service the 10th address of the service range
(cmd/kubeadm/app/constants `GetDNSIP`: `utilnet.GetIndexedIP(svcSubnet, 10)`)."""

NODE_CIDR_MASK_SIZE = 24
"""kubeadm sets `--allocate-node-cidrs=true --cluster-cidr=<podSubnet>` on kube-controller-manager,
whose default `--node-cidr-mask-size` for IPv4 is 24: every node gets a /24 out of the pod range,
and the node IPAM controller does not start when the pod range is smaller than one /24."""

CLUSTER_DOMAIN = "cluster.local"
"""The cluster's own DNS domain (kubeadm `networking.dnsDomain`, rendered by the bootstrap)."""

MAX_NAMESERVERS = 3
"""glibc's resolver reads at most three `nameserver` lines (resolv.conf(5), MAXNS), and the kubelet
drops the rest for pods with a warning."""


@rule
def cluster_name_is_a_dns_label(env: Environment) -> Iterator[Problem]:
    name = cluster_name(env)
    if env.kubernetes.mode == "bootstrap" and not DNS_LABEL.match(name):
        longest = 63 - len(CLUSTER_NAME_SUFFIX)
        yield Problem(
            ("vm", "namePrefix"),
            f"makes the cluster name {name!r} ({len(name)} characters), longer than a DNS label's 63; "
            f"shorten the prefix to at most {longest} characters",
        )


@rule
def service_cidr_size(env: Environment) -> Iterator[Problem]:
    service = env.kubernetes.service_cidr
    if service.prefixlen < MAX_SERVICE_PREFIX_LENGTH_LARGEST:
        yield Problem(
            ("kubernetes", "serviceCidr"),
            f"{service} is larger than a /{MAX_SERVICE_PREFIX_LENGTH_LARGEST}, which kube-apiserver refuses; "
            f"use a /{MAX_SERVICE_PREFIX_LENGTH_LARGEST} or smaller range, e.g. 10.96.0.0/12",
        )
    elif service.num_addresses <= CLUSTER_DNS_INDEX:
        yield Problem(
            ("kubernetes", "serviceCidr"),
            f"{service} has {service.num_addresses} addresses, but kubeadm puts the cluster DNS Service at the "
            f"{CLUSTER_DNS_INDEX}th; use a /28 or larger range",
        )


@rule
def pod_cidr_fits_the_nodes(env: Environment) -> Iterator[Problem]:
    pods = env.kubernetes.pod_cidr
    if env.kubernetes.mode != "bootstrap":
        return
    nodes = len(env.control_plane.nodes) + len(env.gpu_workers.nodes)
    if pods.prefixlen > NODE_CIDR_MASK_SIZE:
        yield Problem(
            ("kubernetes", "podCidr"),
            f"{pods} is smaller than the /{NODE_CIDR_MASK_SIZE} kube-controller-manager gives each node, so it "
            f"does not start its node IPAM; use a /{NODE_CIDR_MASK_SIZE} or larger range (e.g. 10.244.0.0/16)",
        )
        return
    capacity = 2 ** (NODE_CIDR_MASK_SIZE - pods.prefixlen)
    if nodes > capacity:
        yield Problem(
            ("kubernetes", "podCidr"),
            f"{pods} holds {capacity} node range(s) of /{NODE_CIDR_MASK_SIZE}, but the cluster has {nodes} nodes; "
            "the rest get no pod range. Use a larger range",
        )


@rule
def dns_servers_work_during_bootstrap(env: Environment) -> Iterator[Problem]:
    mgmt = env.management_network
    k8s = env.kubernetes
    in_cluster: list[tuple[str, IPv4Network]] = [("kubernetes.podCidr", k8s.pod_cidr), ("kubernetes.serviceCidr", k8s.service_cidr)]
    for i, server in enumerate(mgmt.dns_servers):
        path = ("managementNetwork", "dnsServers", i)
        if server.is_loopback:
            yield Problem(
                path,
                f"{server} is a loopback address: CoreDNS inherits the node's resolv.conf and would forward to "
                "itself (a loop it refuses to run with); give the address of a real DNS server",
            )
        elif server.is_unspecified or server.is_multicast or server.is_reserved or server.is_link_local:
            yield Problem(path, f"{server} cannot be a DNS server; give the address of a real DNS server")
        for key, network in in_cluster:
            if server in network:
                yield Problem(
                    path,
                    f"{server} is inside {key} {network}, which exists only once the cluster runs; the nodes need "
                    "a DNS server outside the cluster to bootstrap (kubeadm pulls images by name)",
                )
    if len(mgmt.dns_servers) > MAX_NAMESERVERS:
        yield Problem(
            ("managementNetwork", "dnsServers"),
            f"lists {len(mgmt.dns_servers)} servers; the resolver reads only the first {MAX_NAMESERVERS}, so list at most {MAX_NAMESERVERS}",
        )


@rule
def node_domain_is_not_the_cluster_domain(env: Environment) -> Iterator[Problem]:
    domain = env.management_network.dns_domain
    if domain == CLUSTER_DOMAIN or domain.endswith("." + CLUSTER_DOMAIN):
        yield Problem(
            ("managementNetwork", "dnsDomain"),
            f"{domain!r} is inside the cluster's own DNS domain {CLUSTER_DOMAIN!r}: CoreDNS answers for it, so the "
            "nodes' names would not resolve from pods; use the site's DNS domain",
        )


@rule
def admin_networks_know_the_load_balancer(env: Environment) -> Iterator[Problem]:
    """With `adminNetworks` the nodes' firewall drops 6443 from every source outside the node,
    pod and admin networks (components/k8s/node_bootstrap/firewall.py). A load balancer in front
    of the API server connects from its own addresses when it rewrites the source (source NAT,
    proxy mode) and always for its health checks: unless they are listed, the API is unreachable
    through the endpoint, and the key is first-boot only, so fixing it later means rolling nodes
    through that unreachable API."""
    k8s = env.kubernetes
    firewall = k8s.node_firewall
    if k8s.mode != "bootstrap" or not firewall.enabled or not firewall.admin_networks:
        return
    endpoint = k8s.control_plane_endpoint
    own = {str(node.management_ip) for node in env.control_plane.nodes}
    if endpoint is None or str(endpoint) in own or firewall.load_balancer_sources:
        return
    yield Problem(
        ("kubernetes", "nodeFirewall", "loadBalancerSources"),
        f"missing: the API server is behind the load balancer {endpoint} (kubernetes.controlPlaneEndpoint) and "
        "kubernetes.nodeFirewall.adminNetworks lets only the cluster's and the admin networks reach port 6443; "
        "list the load balancer's source addresses (its source NAT and health-check addresses, e.g. "
        "[10.10.0.5/32]) here, or remove adminNetworks",
    )
