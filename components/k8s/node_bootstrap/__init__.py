"""The node bootstrap: what each VM needs on its first boot to become a node of the cluster.

Pure functions over plain values, tested without Pulumi. `ClusterBootstrap` calls them inside
`Output.apply` once the generated secrets (CA keys, bootstrap token) are known; nothing here
creates resources, touches the network or reads the clock.

- `spec`: the cluster as the nodes see it (`ClusterSpec`, `ClusterNode`, ...); `checks`: its
  validation; `pki`: the join token and the CA pin;
- `kubeadm`, `calico`: the documents kubeadm and the tigera-operator read;
- `api_server`: the control plane's Pod Security defaults, audit policy and Secrets encryption;
  `firewall`: the node's nftables allow-list;
- `files/`: the bootstrap script, its systemd unit and the host settings, as real files
  (`host_files` loads them); `env_file`: the per-node settings the script reads;
- `user_data`: the `#cloud-config` document of each node (`UserDataRenderer`).

docs/bootstrap.md describes the bootstrap stage by stage and how a re-run behaves.
"""

from components.k8s.node_bootstrap.checks import KUBEADM_API_VERSION
from components.k8s.node_bootstrap.paths import KUBEADM_CONFIG_PATH
from components.k8s.node_bootstrap.pki import bootstrap_token, pem_body, spki_sha256
from components.k8s.node_bootstrap.spec import (
    CalicoSettings,
    ClusterNode,
    ClusterPki,
    ClusterSpec,
    NodeRole,
    Taint,
    host_port,
    node_role,
)
from components.k8s.node_bootstrap.user_data import UserDataRenderer, render_user_data

__all__ = [
    "KUBEADM_API_VERSION",
    "KUBEADM_CONFIG_PATH",
    "CalicoSettings",
    "ClusterNode",
    "ClusterPki",
    "ClusterSpec",
    "NodeRole",
    "Taint",
    "UserDataRenderer",
    "bootstrap_token",
    "host_port",
    "node_role",
    "pem_body",
    "render_user_data",
    "spki_sha256",
]
