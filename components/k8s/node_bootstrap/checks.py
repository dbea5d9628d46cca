"""The checks a `ClusterSpec` must pass: every problem at once, each naming its field.

Facts shared with the stack's own validation (DNS patterns, the supported Kubernetes minors) come
from `components/k8s/facts.py`, so the two cannot drift. The checks read the spec through the
protocols below, the fields they judge, so `spec.py` (which runs them on construction) can import
this module without this module importing it back.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from components.k8s.facts import DNS_LABEL as _DNS_LABEL
from components.k8s.facts import DNS_SUBDOMAIN as _DNS_SUBDOMAIN
from components.k8s.facts import SUPPORTED_KUBERNETES_MINORS


class Taint(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str | None: ...
    @property
    def effect(self) -> str: ...


class Node(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def management_ip(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def taints(self) -> Sequence[Taint]: ...


class Calico(Protocol):
    @property
    def version(self) -> str: ...
    @property
    def block_size(self) -> int: ...
    @property
    def operator_manifest_url(self) -> str | None: ...
    @property
    def encapsulation(self) -> str: ...


class ClusterSpec(Protocol):
    """What `validate_spec` reads of `components.k8s.node_bootstrap.spec.ClusterSpec`."""

    @property
    def cluster_name(self) -> str: ...
    @property
    def kubernetes_version(self) -> str: ...
    @property
    def pod_cidr(self) -> str: ...
    @property
    def service_cidr(self) -> str: ...
    @property
    def control_plane_endpoint(self) -> str: ...
    @property
    def control_plane_nodes(self) -> Sequence[Node]: ...
    @property
    def api_server_port(self) -> int: ...
    @property
    def search_domain(self) -> str | None: ...
    @property
    def ssh_authorized_keys(self) -> Sequence[str]: ...
    @property
    def calico(self) -> Calico: ...
    @property
    def gpu_node_labels(self) -> Mapping[str, str]: ...
    @property
    def rdma_node_labels(self) -> Mapping[str, str]: ...
    @property
    def bootstrap_token_ttl(self) -> str: ...
    @property
    def secrets_encryption_key_names(self) -> Sequence[str]: ...


KUBEADM_API_VERSION = "kubeadm.k8s.io/v1beta4"
"""kubeadm's config API; v1beta4 is served by kubeadm 1.31 and later (v1beta3, deprecated since 1.31,
is removed in 1.37: kubernetes/kubernetes#136016)."""

_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
_CALICO_VERSION = re.compile(r"^v3\.\d+\.\d+$")
_DURATION = re.compile(r"^(0|(\d+h)?(\d+m)?(\d+s)?)$")
# The URL travels in the node's environment file, read by systemd and by the shell alike: no
# character either would interpret.
_ENV_FILE_SAFE_URL = re.compile(r"^https://[^\s'\"$`\\]+$")
_SSH_KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-", "sk-ssh-ed25519", "sk-ecdsa-sha2-")

# Labels the kubelet may set on its own Node (`--node-labels`); any other key under kubernetes.io
# or k8s.io makes the kubelet refuse to start (NodeRestriction), so we reject it up front.
_KUBELET_ALLOWED_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
    }
)
_KUBELET_ALLOWED_PREFIXES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _label_key_errors(where: str, key: str) -> list[str]:
    prefix, _, name = key.rpartition("/")
    errors = []
    if prefix and not _DNS_SUBDOMAIN.match(prefix):
        errors.append(f"{where}: label key {key!r} has an invalid prefix {prefix!r}")
    if not _LABEL_NAME.match(name):
        errors.append(f"{where}: label key {key!r} is not a valid label name")
    return errors


def _kubelet_label_errors(where: str, labels: Mapping[str, str]) -> list[str]:
    errors = []
    for key, value in labels.items():
        errors.extend(_label_key_errors(where, key))
        if not _LABEL_VALUE.match(value):
            errors.append(f"{where}: label {key!r} has an invalid value {value!r}")
        prefix = key.rpartition("/")[0]
        restricted = any(prefix == domain or prefix.endswith("." + domain) for domain in ("kubernetes.io", "k8s.io"))
        allowed = key in _KUBELET_ALLOWED_LABELS or any(
            prefix == p or prefix.endswith("." + p) for p in _KUBELET_ALLOWED_PREFIXES
        )
        if restricted and not allowed:
            errors.append(
                f"{where}: the kubelet may not set label {key!r} on its own node (reserved "
                "kubernetes.io/k8s.io prefix); use your own prefix or set it later with kubectl"
            )
    return errors


def _taint_errors(where: str, taints: Sequence[Taint]) -> list[str]:
    errors = []
    for taint in taints:
        errors.extend(_label_key_errors(where, taint.key))
        if taint.value is not None and not _LABEL_VALUE.match(taint.value):
            errors.append(f"{where}: taint {taint.key!r} has an invalid value {taint.value!r}")
        if taint.effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            errors.append(f"{where}: taint {taint.key!r} has an unknown effect {taint.effect!r}")
    return errors


_ALWAYS_ENCAPSULATED = ("VXLAN", "IPIP")
"""Calico pool modes that tunnel even between nodes of one subnet. A tunnelled packet a node sends
leaves from its tunnel device, whose address Calico allocates from the pool and felix sets on
the device (felix/dataplane/linux/ipip_mgr.go `configureIPIPDevice`, vxlan_mgr.go likewise;
projectcalico/calico#1987), so the pods behind it see the node as a pod address."""


def validate_spec(spec: ClusterSpec) -> list[str]:
    """Every problem with `spec`, each naming the field; empty when the spec is usable."""
    errors: list[str] = []

    if not _DNS_LABEL.match(spec.cluster_name):
        errors.append(f"cluster_name: {spec.cluster_name!r} is not a lowercase DNS label")

    match = _VERSION.match(spec.kubernetes_version)
    if not match:
        errors.append(f"kubernetes_version: {spec.kubernetes_version!r} is not a release like '1.34.2'")
    elif int(match[1]) != 1 or int(match[2]) not in SUPPORTED_KUBERNETES_MINORS:
        supported = SUPPORTED_KUBERNETES_MINORS
        errors.append(
            f"kubernetes_version: {spec.kubernetes_version!r} is not supported by the bootstrap; use "
            f"1.{supported.start} to 1.{supported.stop - 1} ({KUBEADM_API_VERSION} and the pinned Calico)"
        )

    networks: dict[str, ipaddress.IPv4Network | ipaddress.IPv6Network] = {}
    for key in ("pod_cidr", "service_cidr"):
        value = getattr(spec, key)
        try:
            networks[key] = ipaddress.ip_network(value, strict=True)
        except ValueError as exc:
            errors.append(f"{key}: {value!r} is not a network address ({exc})")
    if len(networks) == 2:
        if networks["pod_cidr"].overlaps(networks["service_cidr"]):
            errors.append(
                f"service_cidr: {spec.service_cidr} overlaps pod_cidr {spec.pod_cidr}; choose disjoint ranges"
            )
        service = networks["service_cidr"]
        if service.version == 4 and service.prefixlen < 12:
            errors.append(f"service_cidr: {spec.service_cidr} is larger than /12 (kube-apiserver refuses it)")
        pod = networks["pod_cidr"]
        if pod.version == 4 and pod.prefixlen > spec.calico.block_size:
            errors.append(f"pod_cidr: {spec.pod_cidr} is smaller than one Calico block (/{spec.calico.block_size})")

    key_names = list(spec.secrets_encryption_key_names)
    if not key_names:
        errors.append("secrets_encryption_key_names: give at least one key name (the first encrypts Secrets)")
    bad_names = [name for name in key_names if not _DNS_LABEL.match(name)]
    if bad_names:
        errors.append(f"secrets_encryption_key_names: {', '.join(map(repr, bad_names))} are not lowercase DNS labels")
    repeated = sorted({name for name in key_names if key_names.count(name) > 1})
    if repeated:
        errors.append(f"secrets_encryption_key_names: {', '.join(repeated)} listed more than once")

    endpoint = spec.control_plane_endpoint
    if not endpoint or "://" in endpoint or "/" in endpoint:
        errors.append(
            f"control_plane_endpoint: {endpoint!r} must be a bare host name or IP address (no scheme, no path)"
        )
    else:
        try:
            ipaddress.ip_address(endpoint)
        except ValueError:
            if not _DNS_SUBDOMAIN.match(endpoint):
                errors.append(
                    f"control_plane_endpoint: {endpoint!r} is neither an IP address nor a DNS "
                    "name (give the port in api_server_port)"
                )
    if not 1 <= spec.api_server_port <= 65535:
        errors.append(f"api_server_port: {spec.api_server_port} is not a TCP port")

    if not spec.control_plane_nodes:
        errors.append("control_plane_nodes: at least one control-plane node is required")

    seen_names: set[str] = set()
    seen_ips: set[str] = set()
    for group in ("control_plane_nodes", "worker_nodes"):
        for node in getattr(spec, group):
            where = f"{group}[{node.name}]"
            if not _DNS_LABEL.match(node.name):
                errors.append(f"{where}: name {node.name!r} is not a lowercase DNS label")
            if node.name in seen_names:
                errors.append(f"{where}: node name {node.name!r} is used twice")
            seen_names.add(node.name)
            for attr in ("management_ip", "rdma_ip"):
                value = getattr(node, attr)
                if value is None:
                    continue
                try:
                    address = ipaddress.ip_address(value)
                except ValueError:
                    errors.append(f"{where}: {attr} {value!r} is not an IP address")
                    continue
                for key, network in networks.items():
                    if address in network:
                        errors.append(f"{where}: {attr} {value} lies inside {key} {network}")
            if node.management_ip in seen_ips:
                errors.append(f"{where}: management_ip {node.management_ip} is used twice")
            seen_ips.add(node.management_ip)
            errors.extend(_kubelet_label_errors(f"{where}.labels", node.labels))
            errors.extend(_taint_errors(f"{where}.taints", node.taints))

    errors.extend(_kubelet_label_errors("gpu_node_labels", spec.gpu_node_labels))
    errors.extend(_kubelet_label_errors("rdma_node_labels", spec.rdma_node_labels))

    if spec.search_domain is not None and not _DNS_SUBDOMAIN.match(spec.search_domain):
        errors.append(f"search_domain: {spec.search_domain!r} is not a DNS name")

    for index, key in enumerate(spec.ssh_authorized_keys):
        if "PRIVATE KEY" in key:
            errors.append(f"ssh_authorized_keys[{index}]: this is a private key; give the public key")
        elif not key.startswith(_SSH_KEY_TYPES):
            errors.append(f"ssh_authorized_keys[{index}]: not an OpenSSH public key line (starts with {key[:12]!r})")

    if not _CALICO_VERSION.match(spec.calico.version):
        errors.append(f"calico.version: {spec.calico.version!r} is not a tag like 'v3.31.3'")
    if not 20 <= spec.calico.block_size <= 32:
        errors.append(f"calico.block_size: {spec.calico.block_size} is outside 20..32")
    if spec.calico.encapsulation in _ALWAYS_ENCAPSULATED:
        mode = spec.calico.encapsulation
        errors.append(
            f"calico.encapsulation: {mode!r} tunnels between every two nodes, so a node reaches other nodes' "
            f"pods from its tunnel address (inside pod_cidr), which the NetworkPolicies that admit nodes by "
            f"address refuse (the dcgm-exporter's API servers, the TCP jobs' node networks; "
            f"projectcalico/calico#3665); use '{mode}CrossSubnet' with every node in one subnet"
        )
    url = spec.calico.operator_manifest_url
    if url is not None and not _ENV_FILE_SAFE_URL.match(url):
        errors.append(
            f"calico.operator_manifest_url: {url!r} must be an https:// URL without spaces, quotes, '$' or '\\'"
        )

    if not _DURATION.match(spec.bootstrap_token_ttl) or spec.bootstrap_token_ttl == "":
        errors.append(f"bootstrap_token_ttl: {spec.bootstrap_token_ttl!r} is not a duration like '24h0m0s'")
    return errors
