"""The small cluster the bootstrap tests describe: two control-plane nodes behind an endpoint and
one GPU worker; each test module adds what it needs (`cluster_settings(worker_nodes=[...])`)."""

from __future__ import annotations

import base64
from typing import Any

from components.k8s.node_bootstrap.spec import ClusterNode

GPU_WORKER = ClusterNode(name="gpu-1", management_ip="10.0.0.21", rdma_ip="192.168.0.51", gpu=True)


def cluster_settings(**overrides: Any) -> dict[str, Any]:
    """Keyword arguments of `ClusterSpec` (or `ClusterBootstrapArgs`), `overrides` applied."""
    settings: dict[str, Any] = {
        "cluster_name": "gpu",
        "kubernetes_version": "1.34.2",
        "pod_cidr": "10.244.0.0/16",
        "service_cidr": "10.96.0.0/12",
        "control_plane_endpoint": "10.0.0.10",
        "control_plane_nodes": [
            ClusterNode(name="cp-1", management_ip="10.0.0.11"),
            ClusterNode(name="cp-2", management_ip="10.0.0.12"),
        ],
        "worker_nodes": [GPU_WORKER],
    }
    settings.update(overrides)
    return settings


TEST_ENCRYPTION_KEYS = {"key-1": base64.b64encode(bytes(range(32))).decode()}
"""A Secrets encryption key for `ClusterPki` (the stack generates 32 random bytes per key)."""
PEM_FIELDS = ("ca_cert_pem", "ca_key_pem", "front_proxy_ca_cert_pem", "front_proxy_ca_key_pem", "etcd_ca_cert_pem")
PEM_FIELDS += ("etcd_ca_key_pem", "service_account_key_pem", "service_account_pub_pem")
"""The PEM fields of `ClusterPki` (all but the encryption keys)."""
