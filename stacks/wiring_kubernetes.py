"""From the validated environment to the Kubernetes layer's component arguments."""

from __future__ import annotations

import pulumi

from components.k8s.api_ready import ApiServerReady, ApiServerReadyArgs
from components.k8s.bootstrap import ClusterBootstrap, ClusterBootstrapArgs
from components.k8s.cloud_init import CalicoSettings, ClusterNode
from components.k8s.cluster_access import ClusterAccess, ClusterAccessArgs
from stacks.loader import KUBECONFIG_KEY
from stacks.model import Environment


def cluster_name(env: Environment) -> str:
    return f"{env.vm.name_prefix}-k8s"


def control_plane_endpoint(env: Environment) -> str:
    """The API server's address: the configured DNS name/VIP, else the single control-plane node."""
    return env.kubernetes.control_plane_endpoint or str(env.control_plane.nodes[0].management_ip)


def bootstrap_args(env: Environment) -> ClusterBootstrapArgs:
    k8s = env.kubernetes
    return ClusterBootstrapArgs(
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
        calico=CalicoSettings(version=k8s.cni.version),
        taint_gpu_nodes=k8s.gpu_node_taint,
    )


def cluster_access_when_bootstrapped(
    env: Environment, bootstrap: ClusterBootstrap, control_plane: pulumi.Resource
) -> ClusterAccess:
    """The provider for a cluster this stack bootstraps: usable once its API server answers."""
    ready = ApiServerReady(
        "api-server-ready",
        ApiServerReadyArgs(
            host=control_plane_endpoint(env),
            ca_certificate_pem=bootstrap.ca_certificate_pem,
            timeout_seconds=env.kubernetes.api_ready_timeout_minutes * 60,
        ),
        # The control-plane VMs must exist before there is anything to poll.
        opts=pulumi.ResourceOptions(depends_on=[control_plane]),
    )
    return ClusterAccess(
        "cluster",
        ClusterAccessArgs.for_bootstrap(bootstrap, ready, cluster_identifier=cluster_name(env)),
    )


def cluster_access_existing(env: Environment) -> ClusterAccess:
    """The provider for an existing cluster whose kubeconfig is the stack secret."""
    kubeconfig = pulumi.Config().require_secret(KUBECONFIG_KEY.split(":", 1)[1])
    return ClusterAccess(
        "cluster",
        ClusterAccessArgs.for_existing_cluster(kubeconfig, cluster_identifier=cluster_name(env)),
    )


def bootstrap_if_asked(env: Environment) -> ClusterBootstrap | None:
    """The kubeadm bootstrap of the VMs, unless the stack targets an existing cluster."""
    if env.kubernetes.mode != "bootstrap":
        return None
    return ClusterBootstrap("bootstrap", bootstrap_args(env))


def cluster_access(env: Environment, bootstrap: ClusterBootstrap | None, control_plane: pulumi.Resource) -> ClusterAccess:
    if bootstrap is None:
        return cluster_access_existing(env)
    return cluster_access_when_bootstrapped(env, bootstrap, control_plane)
