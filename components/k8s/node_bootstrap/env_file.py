"""The node's settings for the bootstrap script: `/etc/gpucluster/bootstrap.env`.

The script is the same file on every node; this small file is what differs. systemd reads it with
`EnvironmentFile=` and the tests hand it to the script the same way. Values are plain words (no
spaces, quotes or shell characters), so systemd and a shell read them identically.
"""

from __future__ import annotations

import re

from components.k8s.gpu_runtime import MINIMUM_NVIDIA_CONTAINER_TOOLKIT, NVIDIA_RUNTIME_HANDLER
from components.k8s.node_bootstrap.paths import MIRROR_CA_PATH
from components.k8s.node_bootstrap.spec import ClusterNode, ClusterSpec, NodeRole, control_plane_peers
from components.k8s.version_policy import policy_for

_PLAIN_VALUE = re.compile(r"^[^\s'\"$`\\]*$")


def bootstrap_env(spec: ClusterSpec, role: NodeRole, node: ClusterNode) -> dict[str, str]:
    """The variables the bootstrap script of `node` reads, in the order they are written."""
    values = {
        "GPUCLUSTER_ROLE": role,
        "GPUCLUSTER_API_ENDPOINT": spec.endpoint,
        "GPUCLUSTER_GPU": "true" if node.gpu else "false",
        "GPUCLUSTER_RDMA": "true" if node.rdma_ip is not None else "false",
        # Empty: the GPU Operator configures containerd (or the node has no GPU).
        "GPUCLUSTER_NVIDIA_RUNTIME_HANDLER": (
            NVIDIA_RUNTIME_HANDLER if node.gpu and spec.configure_nvidia_runtime else ""
        ),
    }
    # containerd's pod sandbox: kubeadm's pause for this minor, from the mirror when there is one;
    # the script writes it, and config_path for the registry's hosts.toml, into containerd's config.
    values["GPUCLUSTER_SANDBOX_IMAGE"] = spec.sandbox_image
    # The template's containerd must be one containerd's RELEASES.md recommends for this minor:
    # the oldest patch of each line, newest line first (version_policy); the script refuses less.
    values["GPUCLUSTER_CONTAINERD_FLOORS"] = ",".join(policy_for(spec.kubernetes_version).containerd_floors)
    if spec.mirror_ca_pem:
        # The site CA: into the trust store, and what the script's downloads from the mirror trust.
        values["GPUCLUSTER_MIRROR_CA"] = MIRROR_CA_PATH
    if values["GPUCLUSTER_NVIDIA_RUNTIME_HANDLER"]:
        # The template's toolkit must be at least this (gpu_runtime: CVE-2025-23266).
        values["GPUCLUSTER_NVIDIA_TOOLKIT_MINIMUM"] = MINIMUM_NVIDIA_CONTAINER_TOOLKIT
    if role == "init":
        values["GPUCLUSTER_CALICO_VERSION"] = spec.calico.version
        values["GPUCLUSTER_CALICO_MANIFEST"] = spec.calico.manifest_url
        # The vendored copy's checksum: the script applies only a fetched file that matches.
        values["GPUCLUSTER_CALICO_MANIFEST_SHA256"] = spec.calico.manifest_sha256
        # Empty: Calico's images from quay.io. Else the operator's image is pulled from there too.
        values["GPUCLUSTER_IMAGE_REGISTRY"] = spec.calico.registry or ""
        # The API servers whose answer means the cluster already runs (this VM replaces the first
        # node): the script then joins with kubeadm-join.yaml instead of `kubeadm init`.
        # Comma-separated host:port; empty with a single control-plane node (always init).
        values["GPUCLUSTER_CONTROL_PLANE_PEERS"] = ",".join(control_plane_peers(spec, node))
    # Empty on a node; the tests point it at a temporary root.
    values["GPUCLUSTER_ROOT"] = ""
    return values


def render_bootstrap_env(spec: ClusterSpec, role: NodeRole, node: ClusterNode) -> str:
    lines = ["# Settings of gpucluster-bootstrap.service for this node (written by cloud-init)."]
    for key, value in bootstrap_env(spec, role, node).items():
        if not _PLAIN_VALUE.match(value):
            raise ValueError(f"{key}: {value!r} cannot be written to an environment file")
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"
