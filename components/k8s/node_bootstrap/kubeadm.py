"""kubeadm's documents for each role: init (first control-plane node) and join (everyone else).

How the shared PKI (cluster CA, front-proxy CA, etcd CA, service-account key) reaches each
control-plane node:

- the first node, which runs `kubeadm init`, gets it in its user-data (kubeadm's "external CA
  files present" path): nothing in the cluster can hand it over before the cluster exists;
- every other control-plane node joins with `controlPlane.certificateKey` and downloads it from
  the `kube-system/kubeadm-certs` Secret (cmd/kubeadm/app/phases/copycerts/copycerts.go,
  `DownloadCerts`), which the stack writes itself in kubeadm's format, owned by a short-lived
  token (components/k8s/join/control_plane.py). kubeadm's own `--upload-certs` would not do: its
  Secret expires two hours after `init`, so a VM created later could never join; the stack writes
  a fresh one, under a fresh certificate key, on any `pulumi up` that needs it;
- the first node's replacement (same name, a new VM, the cluster running) joins with the PKI of
  its own user-data, which is the init node's (docs/security.md, "What stays in vCenter").
"""

from __future__ import annotations

from typing import Any

from components.k8s.node_bootstrap.api_server import api_server_extra_args, api_server_extra_volumes
from components.k8s.node_bootstrap.checks import KUBEADM_API_VERSION
from components.k8s.node_bootstrap.paths import CRI_SOCKET, PKI_DIR
from components.k8s.node_bootstrap.spec import ClusterNode, ClusterSpec, node_labels, node_taints
from components.k8s.version_policy import etcd_image_tag


def _node_registration(spec: ClusterSpec, node: ClusterNode, *, control_plane: bool) -> dict[str, Any]:
    extra_args = [{"name": "node-ip", "value": node.management_ip}]
    labels = node_labels(spec, node)
    if labels:
        extra_args.append({"name": "node-labels", "value": ",".join(f"{k}={v}" for k, v in labels.items())})
    taints = []
    for taint in node_taints(spec, node, control_plane=control_plane):
        entry: dict[str, str] = {"key": taint.key, "effect": taint.effect}
        if taint.value is not None:
            entry["value"] = taint.value
        taints.append(entry)
    return {
        "name": node.name,
        "criSocket": CRI_SOCKET,
        "imagePullPolicy": "IfNotPresent",
        # An explicit empty list: kubeadm would otherwise add the control-plane taint by default.
        "taints": taints,
        # v1beta4: a list of {name, value}, no longer a map.
        "kubeletExtraArgs": extra_args,
    }


def kubeadm_init_documents(spec: ClusterSpec, *, token: str) -> list[dict[str, Any]]:
    """InitConfiguration, ClusterConfiguration and KubeletConfiguration for the first node."""
    first = spec.control_plane_nodes[0]
    cert_sans = [spec.control_plane_endpoint, *spec.api_server_cert_sans]
    for node in spec.control_plane_nodes:
        cert_sans.extend([node.name, node.management_ip])
        if spec.search_domain:
            cert_sans.append(f"{node.name}.{spec.search_domain}")
    init = {
        "apiVersion": KUBEADM_API_VERSION,
        "kind": "InitConfiguration",
        "bootstrapTokens": [
            {
                "token": token,
                "description": f"joins nodes to {spec.cluster_name} (vsphere-gpu-cluster)",
                "ttl": spec.bootstrap_token_ttl,
                "usages": ["signing", "authentication"],
                "groups": ["system:bootstrappers:kubeadm:default-node-token"],
            }
        ],
        "nodeRegistration": _node_registration(spec, first, control_plane=True),
        "localAPIEndpoint": {
            "advertiseAddress": first.management_ip,
            "bindPort": spec.api_server_port,
        },
    }
    cluster = {
        "apiVersion": KUBEADM_API_VERSION,
        "kind": "ClusterConfiguration",
        "clusterName": spec.cluster_name,
        "kubernetesVersion": spec.version_tag,
        "controlPlaneEndpoint": spec.endpoint,
        "certificatesDir": PKI_DIR,
        # The stack's etcd, stored with the ClusterConfiguration so every joining control-plane
        # node runs it too (components.k8s.version_policy; the upgrade step keeps it current).
        "etcd": {"local": {"imageTag": etcd_image_tag(spec.kubernetes_version)}},
        "networking": {
            "podSubnet": spec.pod_cidr,
            "serviceSubnet": spec.service_cidr,
            "dnsDomain": "cluster.local",
        },
        # Pod Security defaults, the audit log and Secrets encryption (api_server.py): every
        # control-plane node has the files, since joining ones read this back from the cluster.
        "apiServer": {
            "certSANs": list(dict.fromkeys(cert_sans)),
            "extraArgs": api_server_extra_args(),
            "extraVolumes": api_server_extra_volumes(),
        },
    }
    if spec.image_repository:
        # kubeadm pulls `<imageRepository>/<component>:<tag>`; CoreDNS from a custom repository
        # is `<repo>/coredns:<tag>` (the `coredns/coredns` path applies to registry.k8s.io only:
        # kubeadm images.GetDNSImage), so its own repository keeps the mirror's `coredns/coredns`.
        cluster["imageRepository"] = spec.image_repository
        cluster["dns"] = {"imageRepository": f"{spec.image_repository}/coredns"}
    kubelet = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # containerd in the template runs with SystemdCgroup = true; both must agree.
        "cgroupDriver": "systemd",
    }
    return [init, cluster, kubelet]


def kubeadm_join_document(
    spec: ClusterSpec,
    node: ClusterNode,
    *,
    token: str,
    ca_cert_hash: str,
    control_plane: bool,
    certificate_key: str | None = None,
) -> dict[str, Any]:
    """The JoinConfiguration for `node`; with a `controlPlane` section on control-plane nodes, and
    with `certificate_key` one that downloads the shared PKI from `kubeadm-certs`."""
    join: dict[str, Any] = {
        "apiVersion": KUBEADM_API_VERSION,
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": spec.endpoint,
                "token": token,
                "caCertHashes": [ca_cert_hash],
            },
        },
        "nodeRegistration": _node_registration(spec, node, control_plane=control_plane),
    }
    if control_plane:
        join["controlPlane"] = {
            "localAPIEndpoint": {
                "advertiseAddress": node.management_ip,
                "bindPort": spec.api_server_port,
            }
        }
        if certificate_key is not None:
            # kubeadm's join then runs its download-certs phase (module docstring).
            join["controlPlane"]["certificateKey"] = certificate_key
    return join
