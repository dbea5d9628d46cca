"""The node bootstrap's spec as this environment defines it: one derivation for every user.

`stacks.wiring.kubernetes` builds `ClusterBootstrapArgs` from it, and `validate` runs the
bootstrap's own checks on it (`rules_components`), so what is checked is what is deployed. Pure:
the bootstrap's spec types import no Pulumi.
"""

from __future__ import annotations

from typing import Any, TypeVar

from components.k8s.node_bootstrap import CalicoSettings, ClusterNode, ClusterSpec
from components.k8s.node_bootstrap.spec import NodeFirewall
from stacks.environment.model import Environment

CLUSTER_NAME_SUFFIX = "-k8s"

Spec = TypeVar("Spec", bound=ClusterSpec)


def cluster_name(env: Environment) -> str:
    """The cluster's name (kubeconfig, kubeadm `clusterName`): the VM name prefix plus `-k8s`."""
    return f"{env.vm.name_prefix}{CLUSTER_NAME_SUFFIX}"


def control_plane_endpoint(env: Environment) -> str:
    """The API server's address: the configured DNS name/VIP, else the single control-plane node."""
    return env.kubernetes.control_plane_endpoint or str(env.control_plane.nodes[0].management_ip)


def node_firewall(env: Environment) -> NodeFirewall | None:
    """The nodes' allow-list: management and RDMA subnets are the node networks."""
    settings = env.kubernetes.node_firewall
    if not settings.enabled:
        return None
    return NodeFirewall(
        node_networks=[str(env.management_network.subnet), str(env.rdma_network.subnet)],
        admin_networks=[str(network) for network in settings.admin_networks],
        load_balancer_sources=[str(network) for network in settings.load_balancer_sources],
        rdma_networks=[str(env.rdma_network.subnet)],
    )


def cluster_spec(env: Environment, spec_class: type[Spec], **more: Any) -> Spec:
    """`spec_class` (ClusterSpec or a subclass such as ClusterBootstrapArgs) for this environment;
    `more` carries the subclass's own fields."""
    k8s = env.kubernetes
    return spec_class(
        cluster_name=cluster_name(env),
        kubernetes_version=k8s.version,
        pod_cidr=str(k8s.pod_cidr),
        service_cidr=str(k8s.service_cidr),
        control_plane_endpoint=control_plane_endpoint(env),
        control_plane_nodes=[
            ClusterNode(name=node.name, management_ip=str(node.management_ip)) for node in env.control_plane.nodes
        ],
        worker_nodes=[
            ClusterNode(
                name=node.name,
                management_ip=str(node.management_ip),
                rdma_ip=str(node.rdma_ip) if node.rdma_ip else None,
                gpu=True,
            )
            for node in env.gpu_workers.nodes
        ],
        search_domain=env.management_network.dns_domain,
        ssh_authorized_keys=list(k8s.ssh_authorized_keys),
        calico=CalicoSettings(
            version=k8s.cni.version,
            operator_manifest_url=k8s.cni.operator_manifest_url,
            registry=env.mirror.registry,
            files=env.mirror.files,
        ),
        image_repository=env.mirror.registry,
        mirror_ca_pem=env.mirror.ca_bundle,
        registry_plain_http=env.mirror.plain_http,
        taint_gpu_nodes=k8s.gpu_node_taint,
        # The GPU Operator installs the driver and configures containerd itself.
        configure_nvidia_runtime=env.gpu.mode == "device-plugin",
        secrets_encryption_key_names=list(k8s.secrets_encryption_keys),
        node_firewall=node_firewall(env),
        **more,
    )
