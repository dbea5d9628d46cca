"""First-boot documents for the cluster nodes: kubeadm configuration and cloud-init user-data.

Pure functions over plain values, tested without Pulumi. `ClusterBootstrap` calls them inside
`Output.apply` once the generated secrets (CA keys, bootstrap token) are known; nothing here
creates resources, touches the network or reads the clock.

What each node gets (all through cloud-init's VMware datasource, `guestinfo.userdata`):

- the first control-plane node: the shared cluster PKI, an `InitConfiguration` +
  `ClusterConfiguration` + `KubeletConfiguration`, the Calico `Installation`, and a script that
  runs `kubeadm init` and installs Calico (tigera-operator);
- every other control-plane node: the same shared PKI and a `JoinConfiguration` with a
  `controlPlane` section; it waits for the API server and runs `kubeadm join`;
- workers: a `JoinConfiguration` only (bootstrap token + CA public-key pin), no key material.

Why the shared PKI is handed to every control-plane node instead of `kubeadm init --upload-certs`:
the uploaded `kubeadm-certs` Secret and its certificate key expire two hours after `init`, so a
control-plane VM that is created late (a slow clone, a replacement months later) could never
join. With the four shared items (cluster CA, front-proxy CA, etcd CA, service-account key) in its
user-data, any control-plane node joins whenever it boots; this is kubeadm's documented "manual
certificate distribution". The cost is that those keys sit in every control-plane node's
user-data, which is a secret end to end and is wiped from guestinfo after first boot.

Why discovery by `caCertHashes` and not `discovery.file`: the hash pins the CA's public key, needs
no extra file on the worker, and is computable from the CA key's public half without any DER or
X.509 library (see `spki_sha256`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, Literal

import yaml

KUBEADM_API_VERSION = "kubeadm.k8s.io/v1beta4"
"""kubeadm's config API; v1beta4 is served by kubeadm 1.31 and later (v1beta3 is deprecated)."""

MIN_KUBERNETES_MINOR = 31
"""The oldest Kubernetes minor whose kubeadm reads `kubeadm.k8s.io/v1beta4`."""

DEFAULT_CALICO_VERSION = "v3.31.3"
"""Calico release Tigera tests on Kubernetes 1.32-1.35 (v3.29, often quoted, stops at 1.32)."""

CRI_SOCKET = "unix:///run/containerd/containerd.sock"
KUBEADM_CONFIG_PATH = "/etc/kubernetes/kubeadm-config.yaml"
CALICO_INSTALLATION_PATH = "/etc/kubernetes/calico-installation.yaml"
BOOTSTRAP_SCRIPT_PATH = "/usr/local/sbin/gpucluster-bootstrap.sh"
BOOTSTRAP_DONE_MARKER = "/var/lib/gpucluster/bootstrap.done"
BOOTSTRAP_UNIT_NAME = "gpucluster-bootstrap.service"
BOOTSTRAP_UNIT_PATH = f"/etc/systemd/system/{BOOTSTRAP_UNIT_NAME}"
PKI_DIR = "/etc/kubernetes/pki"
PKI_STAGING_DIR = "/var/lib/gpucluster/pki"
"""Where user-data writes the shared PKI; the script copies it into `PKI_DIR` (see there)."""

BOOTSTRAP_TOKEN_PATTERN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
"""kubeadm's bootstrap token: `<6 char id>.<16 char secret>`, lowercase letters and digits."""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
_CALICO_VERSION = re.compile(r"^v3\.\d+\.\d+$")
_DURATION = re.compile(r"^(0|(\d+h)?(\d+m)?(\d+s)?)$")
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

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
NodeRole = Literal["init", "control-plane", "worker"]


# --------------------------------------------------------------------------------------------
# The plain data model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Taint:
    """A node taint registered by the kubelet at join time (kubeadm `nodeRegistration.taints`)."""

    key: str
    value: str | None = None
    """Default: no value (`key:Effect`)."""
    effect: TaintEffect = "NoSchedule"
    """Default `NoSchedule`."""


@dataclass(frozen=True, kw_only=True)
class ClusterNode:
    """One node of the cluster, described by plain config only (no VM outputs)."""

    name: str
    """Guest hostname and Kubernetes node name; a lowercase DNS label."""
    management_ip: str
    """Static IPv4 address of the management NIC: the kubelet's `node-ip`, Calico's node address
    and, on control-plane nodes, the API server's advertise address."""
    rdma_ip: str | None = None
    """Address of the PVRDMA NIC, if the node has one. Only decides the RDMA labels here; the
    address itself is configured by the datasource's network metadata. Default: no PVRDMA NIC."""
    gpu: bool = False
    """Whether the node has a vGPU: it then gets the GPU labels and, if configured, the GPU taint.
    Default False (explicit in the stack, so a CPU-only node is never tainted by accident)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra node labels, set by the kubelet at registration. Default none."""
    taints: Sequence[Taint] = ()
    """Extra taints, set by the kubelet at registration. Default none."""


@dataclass(frozen=True, kw_only=True)
class CalicoSettings:
    """How the CNI (Calico, through the tigera-operator manifest) is installed."""

    version: str = DEFAULT_CALICO_VERSION
    """Calico release tag. Default `v3.31.3`."""
    operator_manifest_url: str | None = None
    """Where the first control-plane node fetches `tigera-operator.yaml`. Default: the release's
    manifest on raw.githubusercontent.com; set a mirror for air-gapped sites."""
    encapsulation: Literal["VXLAN", "VXLANCrossSubnet", "IPIP", "IPIPCrossSubnet", "None"] = "VXLANCrossSubnet"
    """Pod traffic encapsulation. Default `VXLANCrossSubnet`: no overlay inside one L2 segment,
    VXLAN (UDP 4789) across subnets; needs no BGP peering with the physical network."""
    block_size: int = 26
    """Per-node pod address block (IPv4 prefix length). Default 26 (64 pods per block)."""

    @property
    def manifest_url(self) -> str:
        if self.operator_manifest_url:
            return self.operator_manifest_url
        return f"https://raw.githubusercontent.com/projectcalico/calico/{self.version}/manifests/tigera-operator.yaml"


DEFAULT_GPU_NODE_LABELS: Mapping[str, str] = {"nvidia.com/gpu.present": "true"}
DEFAULT_RDMA_NODE_LABELS: Mapping[str, str] = {"feature.node.kubernetes.io/rdma.capable": "true"}
GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
CONTROL_PLANE_TAINT = Taint(key="node-role.kubernetes.io/control-plane", effect="NoSchedule")


@dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    """Everything about the cluster that its nodes' first-boot documents depend on.

    All plain values: they decide which files and commands exist. Validated on construction;
    every problem is reported at once, each naming the field.
    """

    cluster_name: str
    """Kubernetes cluster name (kubeadm `clusterName`, the kubeconfig's cluster entry)."""
    kubernetes_version: str
    """Kubernetes release, e.g. "1.34.2"; must match the kubeadm/kubelet in the VM template.
    1.31 or later (kubeadm config v1beta4)."""
    pod_cidr: str
    """Pod network (kubeadm `networking.podSubnet`, Calico's IP pool)."""
    service_cidr: str
    """Service network (kubeadm `networking.serviceSubnet`)."""
    control_plane_endpoint: str
    """Host name or IP address clients and nodes use for the API server. With more than one
    control-plane node, a load-balanced VIP or DNS name in front of all of them."""
    control_plane_nodes: Sequence[ClusterNode]
    """Control-plane nodes; the first one runs `kubeadm init`, the rest join it."""
    worker_nodes: Sequence[ClusterNode] = ()
    """Worker nodes. Default none."""
    api_server_port: int = 6443
    """Port of the endpoint and of every API server's `bindPort`. Default 6443."""
    search_domain: str | None = None
    """DNS domain of the nodes: each node's FQDN is `<name>.<search_domain>`. Default none
    (short hostnames). DNS servers belong in the datasource's network metadata, not here."""
    ssh_authorized_keys: Sequence[str] = ()
    """Public SSH keys for the template's default user. Default none."""
    api_server_cert_sans: Sequence[str] = ()
    """Extra names/IPs for the API server certificate; the endpoint, the node names and
    addresses are always included by kubeadm. Default none."""
    calico: CalicoSettings = field(default_factory=CalicoSettings)
    """CNI settings. Default: `CalicoSettings()`."""
    gpu_node_labels: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_GPU_NODE_LABELS))
    """Labels on nodes with `gpu=True`. Default `nvidia.com/gpu.present=true`."""
    rdma_node_labels: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_RDMA_NODE_LABELS))
    """Labels on nodes with an `rdma_ip`. Default `feature.node.kubernetes.io/rdma.capable=true`."""
    taint_gpu_nodes: bool = False
    """Taint GPU nodes `nvidia.com/gpu=present:NoSchedule` so only pods tolerating it land there.
    Default False."""
    schedule_on_control_plane: bool = False
    """Drop the control-plane `NoSchedule` taint (small clusters). Default False."""
    bootstrap_token_ttl: str = "24h0m0s"
    """Lifetime of the join token created by `kubeadm init`. Default 24h: nodes created later
    need a fresh token (`kubeadm token create`). "0" never expires (weaker; the token is a
    standing credential for joining nodes)."""

    def __post_init__(self) -> None:
        errors = self.validation_errors()
        if errors:
            raise ValueError("invalid cluster bootstrap settings:\n  - " + "\n  - ".join(errors))

    def validation_errors(self) -> list[str]:
        """Every problem with these settings (subclasses add their own)."""
        return validate_spec(self)

    @property
    def version_tag(self) -> str:
        """The version as kubeadm writes it: `v1.34.2`."""
        return "v" + self.kubernetes_version.removeprefix("v")

    @property
    def endpoint(self) -> str:
        """`host:port` of the API server, IPv6 hosts in brackets."""
        return host_port(self.control_plane_endpoint, self.api_server_port)

    @property
    def all_nodes(self) -> list[ClusterNode]:
        return [*self.control_plane_nodes, *self.worker_nodes]

    @cached_property
    def nodes_by_name(self) -> Mapping[str, tuple[NodeRole, ClusterNode]]:
        """Each node's role and settings by name: rendering looks nodes up once per node, and a
        scan each time would make a cluster's rendering quadratic in its size."""
        index: dict[str, tuple[NodeRole, ClusterNode]] = {}
        for position, node in enumerate(self.control_plane_nodes):
            index.setdefault(node.name, ("init" if position == 0 else "control-plane", node))
        for node in self.worker_nodes:
            index.setdefault(node.name, ("worker", node))
        return index


@dataclass(frozen=True, kw_only=True)
class ClusterPki:
    """The key material every control-plane node must share (PEM strings; all secret but the
    certificates)."""

    ca_cert_pem: str
    ca_key_pem: str
    front_proxy_ca_cert_pem: str
    front_proxy_ca_key_pem: str
    etcd_ca_cert_pem: str
    etcd_ca_key_pem: str
    service_account_key_pem: str
    service_account_pub_pem: str


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def host_port(host: str, port: int) -> str:
    try:
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]:{port}"
    except ValueError:
        pass
    return f"{host}:{port}"


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


def validate_spec(spec: ClusterSpec) -> list[str]:
    """Every problem with `spec`, each naming the field; empty when the spec is usable."""
    errors: list[str] = []

    if not _DNS_LABEL.match(spec.cluster_name):
        errors.append(f"cluster_name: {spec.cluster_name!r} is not a lowercase DNS label")

    match = _VERSION.match(spec.kubernetes_version)
    if not match:
        errors.append(f"kubernetes_version: {spec.kubernetes_version!r} is not a release like '1.34.2'")
    elif (int(match[1]), int(match[2])) < (1, MIN_KUBERNETES_MINOR):
        errors.append(
            f"kubernetes_version: {spec.kubernetes_version!r} is older than "
            f"1.{MIN_KUBERNETES_MINOR}, whose kubeadm is the first to read {KUBEADM_API_VERSION}"
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
    if spec.calico.operator_manifest_url is not None and not spec.calico.operator_manifest_url.startswith("https://"):
        errors.append("calico.operator_manifest_url: must be an https:// URL")

    if not _DURATION.match(spec.bootstrap_token_ttl) or spec.bootstrap_token_ttl == "":
        errors.append(f"bootstrap_token_ttl: {spec.bootstrap_token_ttl!r} is not a duration like '24h0m0s'")
    return errors


# --------------------------------------------------------------------------------------------
# Small pure helpers
# --------------------------------------------------------------------------------------------


def spki_sha256(public_key_pem: str) -> str:
    """kubeadm's discovery pin for a CA: `sha256:` + hex SHA-256 of the DER SubjectPublicKeyInfo.

    kubeadm hashes `x509.Certificate.RawSubjectPublicKeyInfo` (RFC 7469 pin). A "PUBLIC KEY"
    PEM block (what pulumi-tls exports as `public_key_pem`, Go's `MarshalPKIXPublicKey`) *is* that
    DER SubjectPublicKeyInfo, base64-armoured, and a certificate made from the same key embeds
    the identical structure. So the hash needs no X.509 parser. A PKCS#1 "RSA PUBLIC KEY" block
    lacks the algorithm identifier and would give a wrong pin, so it is refused.
    """
    der = pem_body(public_key_pem, "PUBLIC KEY")
    return "sha256:" + hashlib.sha256(der).hexdigest()


def pem_body(pem: str, label: str) -> bytes:
    """The DER bytes of the first PEM block labelled `label`."""
    begin, end = f"-----BEGIN {label}-----", f"-----END {label}-----"
    start = pem.find(begin)
    stop = pem.find(end, start + len(begin))
    if start < 0 or stop < 0:
        raise ValueError(f"no '{label}' PEM block found")
    body = "".join(pem[start + len(begin) : stop].split())
    try:
        return base64.b64decode(body, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"the '{label}' PEM block is not valid base64: {exc}") from exc


def bootstrap_token(token_id: str, token_secret: str) -> str:
    """Join the two random parts into a kubeadm bootstrap token, checking the format."""
    token = f"{token_id}.{token_secret}"
    if not BOOTSTRAP_TOKEN_PATTERN.match(token):
        # Never echo the value: it is a credential.
        raise ValueError("bootstrap token parts must be [a-z0-9]{6} and [a-z0-9]{16}")
    return token


def node_role(spec: ClusterSpec, node_name: str) -> NodeRole:
    """`init` for the first control-plane node, `control-plane` for the others, else `worker`."""
    return _indexed(spec, node_name)[0]


def find_node(spec: ClusterSpec, node_name: str) -> ClusterNode:
    return _indexed(spec, node_name)[1]


def _indexed(spec: ClusterSpec, node_name: str) -> tuple[NodeRole, ClusterNode]:
    try:
        return spec.nodes_by_name[node_name]
    except KeyError:
        raise KeyError(f"{node_name!r} is not a node of cluster {spec.cluster_name!r}") from None


def node_labels(spec: ClusterSpec, node: ClusterNode) -> dict[str, str]:
    """The labels the kubelet registers `node` with: GPU, RDMA, then the node's own (which win)."""
    labels: dict[str, str] = {}
    if node.gpu:
        labels.update(spec.gpu_node_labels)
    if node.rdma_ip is not None:
        labels.update(spec.rdma_node_labels)
    labels.update(node.labels)
    return dict(sorted(labels.items()))


def node_taints(spec: ClusterSpec, node: ClusterNode, *, control_plane: bool) -> list[Taint]:
    taints: list[Taint] = []
    if control_plane and not spec.schedule_on_control_plane:
        taints.append(CONTROL_PLANE_TAINT)
    if node.gpu and spec.taint_gpu_nodes:
        taints.append(GPU_TAINT)
    taints.extend(node.taints)
    return taints


# --------------------------------------------------------------------------------------------
# kubeadm documents
# --------------------------------------------------------------------------------------------


def _node_registration(spec: ClusterSpec, node: ClusterNode, *, control_plane: bool) -> dict:
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
        "networking": {
            "podSubnet": spec.pod_cidr,
            "serviceSubnet": spec.service_cidr,
            "dnsDomain": "cluster.local",
        },
        "apiServer": {"certSANs": list(dict.fromkeys(cert_sans))},
    }
    kubelet = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # containerd in the template runs with SystemdCgroup = true; both must agree.
        "cgroupDriver": "systemd",
    }
    return [init, cluster, kubelet]


def kubeadm_join_document(
    spec: ClusterSpec, node: ClusterNode, *, token: str, ca_cert_hash: str, control_plane: bool
) -> dict[str, Any]:
    """The JoinConfiguration for `node`; with a `controlPlane` section on control-plane nodes."""
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
        # No certificateKey: the shared PKI is already on disk (see the module docstring).
        join["controlPlane"] = {
            "localAPIEndpoint": {
                "advertiseAddress": node.management_ip,
                "bindPort": spec.api_server_port,
            }
        }
    return join


def calico_installation_documents(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The tigera-operator `Installation` for this cluster's pod network."""
    return [
        {
            "apiVersion": "operator.tigera.io/v1",
            "kind": "Installation",
            "metadata": {"name": "default"},
            "spec": {
                "calicoNetwork": {
                    "ipPools": [
                        {
                            "name": "default-ipv4-ippool",
                            "cidr": spec.pod_cidr,
                            "blockSize": spec.calico.block_size,
                            "encapsulation": spec.calico.encapsulation,
                            "natOutgoing": "Enabled",
                            "nodeSelector": "all()",
                        }
                    ],
                    # The kubelet's node-ip is the management address; without this, Calico's
                    # first-found autodetection may pick the PVRDMA NIC.
                    "nodeAddressAutodetectionV4": {"kubernetes": "NodeInternalIP"},
                },
            },
        }
    ]


# --------------------------------------------------------------------------------------------
# The bootstrap script and the cloud-config document
# --------------------------------------------------------------------------------------------

_SCRIPT_HEADER = """\
#!/bin/bash
# First-boot Kubernetes bootstrap, rendered by vsphere-gpu-cluster (components/k8s/cloud_init.py).
# Role: {role}. Run by gpucluster-bootstrap.service: `journalctl -u gpucluster-bootstrap`.
set -euo pipefail

if [ -f {marker} ]; then
  echo "gpucluster: already bootstrapped ({marker} exists)"
  exit 0
fi

retry() {{  # retry ATTEMPTS DELAY_SECONDS COMMAND...
  local attempts=$1 delay=$2 n=1
  shift 2
  until "$@"; do
    if [ "$n" -ge "$attempts" ]; then
      echo "gpucluster: giving up after $n attempts: $*" >&2
      return 1
    fi
    echo "gpucluster: attempt $n failed, retrying in ${{delay}}s: $*" >&2
    n=$((n + 1))
    sleep "$delay"
  done
}}

# Node prerequisites. The template should already satisfy them; applying them again is harmless
# and saves a failed kubeadm preflight when it does not.
swapoff -a
sed -ri '/\\sswap\\s/s/^([^#])/#\\1/' /etc/fstab
modprobe overlay
modprobe br_netfilter
sysctl -p /etc/sysctl.d/99-kubernetes.conf  # only ours: --system fails on unrelated keys
# Calico programs iptables/nftables itself; firewalld would fight it (Calico's requirements).
systemctl disable --now firewalld 2>/dev/null || true
if systemctl is-active --quiet NetworkManager; then systemctl reload NetworkManager; fi
systemctl enable --now containerd
systemctl enable kubelet
"""

_WAIT_FOR_API = """\
echo "gpucluster: waiting for the API server at https://{endpoint}/readyz"
# Only a readiness probe: the join itself authenticates the API server by the CA pin.
retry 120 15 curl -ksf -o /dev/null https://{endpoint}/readyz
"""

# `kubeadm reset` empties /etc/kubernetes/pki, so the shared PKI is kept in a staging folder and
# copied in before every attempt; otherwise a retried init would mint a new CA.
_INSTALL_PKI = """\
install_pki() {{
  mkdir -p {pki_dir}
  cp -a {staging}/. {pki_dir}/
}}
"""

_INIT = """\
retry 10 30 kubeadm config images pull --config {config}
init() {{
  install_pki
  kubeadm init --config {config} --skip-token-print || {{ kubeadm reset --force; return 1; }}
}}
retry 3 60 init
export KUBECONFIG=/etc/kubernetes/admin.conf
echo "gpucluster: installing Calico {calico_version}"
# Server-side apply: the operator's CRDs are too large for client-side apply's annotation, and
# unlike `kubectl create` it is safe to repeat.
retry 20 15 kubectl apply --server-side --force-conflicts -f {manifest_url}
retry 20 15 kubectl wait --for condition=established --timeout=60s \\
  crd/installations.operator.tigera.io
retry 20 15 kubectl apply --server-side --force-conflicts -f {installation}
"""

_WAIT_FOR_GPU = """\
# The vGPU is attached after the clone: our VgpuAttachment powers the VM off, adds the device and
# powers it on again. Joining before that would register a node without a GPU, so wait for an
# NVIDIA PCI function (vendor 0x10de); the power cycle interrupts this wait, and the systemd unit
# runs the script again on the next boot.
until grep -qsx 0x10de /sys/bus/pci/devices/*/vendor; do
  echo "gpucluster: waiting for the vGPU to be attached (NVIDIA PCI device)"
  sleep 15
done
"""

_JOIN = """\
# Nodes join at the same time and etcd adds one member at a time: retry, resetting in between.
join() {{
  {install}kubeadm join --config {config} || {{ kubeadm reset --force; return 1; }}
}}
retry 20 30 join
"""

_SCRIPT_FOOTER = """\
# Neither the join token nor the staged key copies are needed any more.
rm -rf {config} {staging}
mkdir -p "$(dirname {marker})"
touch {marker}
echo "gpucluster: bootstrap of $(hostname) as {role} finished"
"""


def render_bootstrap_script(spec: ClusterSpec, role: NodeRole, node_name: str) -> str:
    """The shell script the bootstrap unit runs on a node of the given role."""
    q = shlex.quote
    config = q(KUBEADM_CONFIG_PATH)
    parts = [_SCRIPT_HEADER.format(role=role, marker=q(BOOTSTRAP_DONE_MARKER))]
    if role != "worker":
        parts.append(_INSTALL_PKI.format(pki_dir=q(PKI_DIR), staging=q(PKI_STAGING_DIR)))
    if role == "init":
        parts.append(
            _INIT.format(
                config=config,
                calico_version=spec.calico.version,
                manifest_url=q(spec.calico.manifest_url),
                installation=q(CALICO_INSTALLATION_PATH),
            )
        )
    else:
        if find_node(spec, node_name).gpu:
            parts.append(_WAIT_FOR_GPU)
        parts.append(_WAIT_FOR_API.format(endpoint=spec.endpoint))
        install = "install_pki; " if role == "control-plane" else ""
        parts.append(_JOIN.format(config=config, install=install))
    parts.append(
        _SCRIPT_FOOTER.format(config=config, staging=q(PKI_STAGING_DIR), marker=q(BOOTSTRAP_DONE_MARKER), role=role)
    )
    return "\n".join(parts)


def render_bootstrap_unit() -> str:
    """A oneshot unit that runs the bootstrap script on every boot until it has succeeded."""
    return (
        "[Unit]\n"
        "Description=Bootstrap this node into the Kubernetes cluster (vsphere-gpu-cluster)\n"
        "Wants=network-online.target\n"
        "After=network-online.target containerd.service\n"
        f"ConditionPathExists=!{BOOTSTRAP_DONE_MARKER}\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"ExecStart={BOOTSTRAP_SCRIPT_PATH}\n"
        "RemainAfterExit=yes\n"
        "TimeoutStartSec=infinity\n"
        "StandardOutput=journal+console\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


_MODULES = "overlay\nbr_netfilter\n"
_SYSCTL = "net.bridge.bridge-nf-call-iptables = 1\nnet.bridge.bridge-nf-call-ip6tables = 1\nnet.ipv4.ip_forward = 1\n"
# Calico's documented NetworkManager setting: leave its interfaces alone.
_NM_CALICO = (
    "[keyfile]\n"
    "unmanaged-devices=interface-name:cali*;interface-name:tunl*;interface-name:vxlan.calico;"
    "interface-name:vxlan-v6.calico;interface-name:wireguard.cali;interface-name:wg-v6.cali\n"
)


def _file(path: str, content: str, permissions: str) -> dict[str, str]:
    if not content.endswith("\n"):
        content += "\n"
    return {"path": path, "owner": "root:root", "permissions": permissions, "content": content}


def _pki_files(pki: ClusterPki) -> list[dict[str, str]]:
    """The shared control-plane PKI, staged under the names kubeadm expects (keys 0600)."""
    d = PKI_STAGING_DIR
    return [
        _file(f"{d}/ca.crt", pki.ca_cert_pem, "0644"),
        _file(f"{d}/ca.key", pki.ca_key_pem, "0600"),
        _file(f"{d}/front-proxy-ca.crt", pki.front_proxy_ca_cert_pem, "0644"),
        _file(f"{d}/front-proxy-ca.key", pki.front_proxy_ca_key_pem, "0600"),
        _file(f"{d}/etcd/ca.crt", pki.etcd_ca_cert_pem, "0644"),
        _file(f"{d}/etcd/ca.key", pki.etcd_ca_key_pem, "0600"),
        _file(f"{d}/sa.key", pki.service_account_key_pem, "0600"),
        _file(f"{d}/sa.pub", pki.service_account_pub_pem, "0644"),
    ]


# libyaml's emitter when PyYAML has it (same output, ~8x faster: this renders every node's
# user-data, the largest share of a plan's time at hundreds of workers; see BENCHMARKS.md).
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _CloudConfigDumper(_SafeDumper):  # type: ignore[valid-type,misc]
    """Multi-line strings (PEM blocks, scripts) as literal blocks, for a readable document."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_CloudConfigDumper.add_representer(str, _represent_str)


def dump_yaml_documents(documents: Sequence[Mapping[str, Any]]) -> str:
    return yaml.dump_all(
        [dict(d) for d in documents],
        Dumper=_CloudConfigDumper,
        sort_keys=False,
        default_flow_style=False,
        explicit_start=True,
    )


def render_user_data(
    spec: ClusterSpec,
    node_name: str,
    *,
    token: str,
    ca_cert_hash: str,
    pki: ClusterPki | None,
) -> str:
    """The `#cloud-config` user-data of one node.

    `pki` is required for control-plane nodes and ignored for workers (they never receive key
    material). The result contains credentials: callers must keep it secret. To render many nodes
    from the same credentials, use one `UserDataRenderer`.
    """
    return UserDataRenderer(spec, token=token, ca_cert_hash=ca_cert_hash, pki=pki).render(node_name)


_RUNCMD = [
    # Started from a systemd unit rather than run by `runcmd` directly: runcmd runs once per
    # instance, and a GPU worker is power-cycled by the vGPU attachment during its first boot.
    # The unit runs on every boot until the script leaves its done-marker. --no-block, because
    # runcmd itself runs inside a unit (cloud-final) that must not wait for ours.
    ["systemctl", "daemon-reload"],
    ["systemctl", "enable", BOOTSTRAP_UNIT_NAME],
    ["systemctl", "start", "--no-block", BOOTSTRAP_UNIT_NAME],
]


def dump_yaml(value: Any) -> str:
    """One YAML document, block style, keys in insertion order, multi-line strings as literals."""
    return yaml.dump(value, Dumper=_CloudConfigDumper, sort_keys=False, default_flow_style=False)


class UserDataRenderer:
    """Renders the user-data of any number of nodes from one set of cluster credentials.

    Most of a node's document is the same for every node of its role: the bootstrap script, the
    systemd unit, the host settings and, on control-plane nodes, the staged PKI. Each `write_files`
    entry is YAML-emitted once per distinct content and reused; emitting them again for every
    node was most of the time spent rendering at hundreds of workers (BENCHMARKS.md, finding 13).
    The document is the same, byte for byte, as emitting it whole: an entry of a block sequence
    that is a mapping's value is written exactly as the same entry of a top-level sequence.

    It keeps credentials (in the emitted PKI entries): keep it no longer than its documents.
    """

    def __init__(self, spec: ClusterSpec, *, token: str, ca_cert_hash: str, pki: ClusterPki | None) -> None:
        if not BOOTSTRAP_TOKEN_PATTERN.match(token):
            raise ValueError("token is not a kubeadm bootstrap token ([a-z0-9]{6}.[a-z0-9]{16})")
        if not ca_cert_hash.startswith("sha256:"):
            raise ValueError("ca_cert_hash must be 'sha256:<hex>'")
        self._spec = spec
        self._token = token
        self._ca_cert_hash = ca_cert_hash
        self._pki = pki
        self._emitted_files: dict[tuple[tuple[str, str], ...], str] = {}

    def render(self, node_name: str) -> str:
        """The `#cloud-config` user-data of one node of the cluster."""
        spec = self._spec
        node = find_node(spec, node_name)
        role = node_role(spec, node_name)
        files = [
            _file("/etc/modules-load.d/kubernetes.conf", _MODULES, "0644"),
            _file("/etc/sysctl.d/99-kubernetes.conf", _SYSCTL, "0644"),
            _file("/etc/NetworkManager/conf.d/calico.conf", _NM_CALICO, "0644"),
        ]
        token, ca_cert_hash = self._token, self._ca_cert_hash
        if role == "worker":
            kubeadm_docs = [
                kubeadm_join_document(spec, node, token=token, ca_cert_hash=ca_cert_hash, control_plane=False)
            ]
        else:
            if self._pki is None:
                raise ValueError(f"control-plane node {node_name!r} needs the shared PKI")
            files.extend(_pki_files(self._pki))
            if role == "init":
                kubeadm_docs = kubeadm_init_documents(spec, token=token)
                files.append(
                    _file(
                        CALICO_INSTALLATION_PATH,
                        dump_yaml_documents(calico_installation_documents(spec)),
                        "0644",
                    )
                )
            else:
                kubeadm_docs = [
                    kubeadm_join_document(spec, node, token=token, ca_cert_hash=ca_cert_hash, control_plane=True)
                ]
        # 0600: the kubeadm config holds the bootstrap token.
        files.append(_file(KUBEADM_CONFIG_PATH, dump_yaml_documents(kubeadm_docs), "0600"))
        files.append(_file(BOOTSTRAP_SCRIPT_PATH, render_bootstrap_script(spec, role, node_name), "0700"))
        files.append(_file(BOOTSTRAP_UNIT_PATH, render_bootstrap_unit(), "0644"))

        head: dict[str, Any] = {
            "hostname": node.name,
            "preserve_hostname": False,
        }
        if spec.search_domain:
            head["fqdn"] = f"{node.name}.{spec.search_domain}"
        if spec.ssh_authorized_keys:
            head["ssh_authorized_keys"] = list(spec.ssh_authorized_keys)
        write_files = "".join(self._emitted_file(entry) for entry in files)
        return "#cloud-config\n" + dump_yaml(head) + "write_files:\n" + write_files + _runcmd_block()

    def _emitted_file(self, entry: dict[str, str]) -> str:
        key = tuple(entry.items())
        emitted = self._emitted_files.get(key)
        if emitted is None:
            emitted = self._emitted_files[key] = dump_yaml([entry])
        return emitted


@cache
def _runcmd_block() -> str:
    return dump_yaml({"runcmd": _RUNCMD})
