"""The cluster as its nodes' first-boot documents see it: plain values, validated on construction.

Nothing here creates resources, touches the network or reads the clock; `ClusterBootstrap` maps
the stack onto a `ClusterSpec` and the renderers turn it into each node's user-data.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from components.k8s.facts import DEFAULT_CALICO_VERSION
from components.k8s.kubeadm_pins import kubeadm_pins
from components.k8s.mirror import mirrored_url
from components.k8s.node_bootstrap.checks import validate_spec
from components.k8s.vendored import CALICO_OPERATOR, pinned

DEFAULT_IMAGE_REPOSITORY = "registry.k8s.io"
"""kubeadm's own image repository (`DefaultImageRepository`, cmd/kubeadm/app/constants)."""

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
NodeRole = Literal["init", "control-plane", "worker"]


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
    """Address of the PVRDMA NIC, if the node has one. Decides the RDMA labels and the RDMA kernel
    modules and device check of the bootstrap; the address itself is configured by the datasource's
    network metadata. Default: no PVRDMA NIC."""
    gpu: bool = False
    """Whether the node has a vGPU: it then gets the GPU labels, waits for its vGPU before joining,
    gets containerd's NVIDIA runtime handler and, if configured, the GPU taint. Default False
    (explicit in the stack, so a CPU-only node is never tainted by accident)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra node labels, set by the kubelet at registration. Default none."""
    taints: Sequence[Taint] = ()
    """Extra taints, set by the kubelet at registration. Default none."""


@dataclass(frozen=True, kw_only=True)
class CalicoSettings:
    """How the CNI (Calico, through the tigera-operator manifest) is installed."""

    version: str = DEFAULT_CALICO_VERSION
    """Calico release tag. Default: the pin in `components/k8s/facts.py`."""
    operator_manifest_url: str | None = None
    """Where the first control-plane node fetches `tigera-operator.yaml`. Default: the release's
    manifest on raw.githubusercontent.com; set a mirror for air-gapped sites (stack key
    `kubernetes.cni.operatorManifestUrl`)."""
    encapsulation: Literal["VXLAN", "VXLANCrossSubnet", "IPIP", "IPIPCrossSubnet", "None"] = "VXLANCrossSubnet"
    """Pod traffic encapsulation. Default `VXLANCrossSubnet`: no overlay inside one L2 segment,
    VXLAN (UDP 4789) across subnets; needs no BGP peering with the physical network. `VXLAN` and
    `IPIP` are refused: they tunnel between nodes of one subnet too, and a node's tunnelled packets
    carry its tunnel address, which NetworkPolicies admitting nodes by address refuse (checks.py)."""
    block_size: int = 26
    """Per-node pod address block (IPv4 prefix length). Default 26 (64 pods per block)."""
    registry: str | None = None
    """Mirror registry prefix for Calico's images: the Installation's `registry` (operator-managed
    images) and, in the fetched manifest, the operator's own image (`quay.io/` replaced, as
    Calico's "Configure use of your image registry" page does with sed). Default none: quay.io."""
    files: str | None = None
    """Mirror file base the manifest is fetched from when no `operator_manifest_url` is set
    (`<files>/raw.githubusercontent.com/projectcalico/calico/<version>/manifests/tigera-operator.yaml`).
    Default none: GitHub."""

    @property
    def upstream_manifest_url(self) -> str:
        return f"https://raw.githubusercontent.com/projectcalico/calico/{self.version}/manifests/tigera-operator.yaml"

    @property
    def manifest_url(self) -> str:
        if self.operator_manifest_url:
            return self.operator_manifest_url
        return mirrored_url(self.upstream_manifest_url, self.files)

    @property
    def manifest_sha256(self) -> str:
        """SHA-256 of the release's `tigera-operator.yaml` as recorded in manifests/index.json (the
        file is not vendored): the bootstrap applies a fetched file only when it matches.
        `ManifestNotPinned` for a release with no recorded checksum."""
        return pinned(CALICO_OPERATOR, self.version).sha256


@dataclass(frozen=True, kw_only=True)
class NodeFirewall:
    """Which networks the nodes' own ports answer (CIDRs)."""

    node_networks: Sequence[str]
    """The nodes' own networks: management and RDMA subnets."""
    admin_networks: Sequence[str] = ()
    """Where operators run kubectl and Pulumi from, when outside the node networks. Default none."""
    load_balancer_sources: Sequence[str] = ()
    """Where the API server's load balancer connects from (its source-NAT addresses and health
    checks): with admin networks listed, the API server answers these too. Default none."""
    rdma_networks: Sequence[str] = ()
    """The RDMA subnets (also in `node_networks`): pods never reach them over the kernel's network
    stack (the ESXi hosts' PVRDMA vmknics answer there, and trust the subnet). Default none."""


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
    A minor of `SUPPORTED_KUBERNETES_MINORS` (`components/k8s/facts.py`)."""
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
    configure_nvidia_runtime: bool = True
    """On GPU nodes, the bootstrap adds containerd's `nvidia` runtime handler (what the `nvidia`
    RuntimeClass points at) with the template's NVIDIA Container Toolkit, and fails loudly when the
    driver or the toolkit is missing. Default True (device-plugin mode: driver and toolkit in the
    template). False when the GPU Operator installs the driver and configures containerd itself."""
    image_repository: str | None = None
    """Registry prefix kubeadm pulls the control-plane images from (ClusterConfiguration
    `imageRepository`, CoreDNS's under `<prefix>/coredns`). Default none: registry.k8s.io."""
    mirror_ca_pem: str | None = None
    """PEM certificate(s) of the CA that signed the mirror's servers: installed in every node's
    trust store, given to containerd for `image_repository`'s host, and trusted by the first boot's
    downloads. Default none: the template's system CAs only."""
    registry_plain_http: bool = False
    """containerd reaches `image_repository`'s host over plain HTTP. Default False: HTTPS."""
    secrets_encryption_key_names: Sequence[str] = ("key-1",)
    """Names of the keys that encrypt Secrets at rest (api_server.py), in the API server's order:
    the first encrypts every write, all of them decrypt. Each name stands for 32 random bytes the
    stack generates (`ClusterPki.secrets_encryption_keys`). Default one key, `key-1`; rotate by
    adding a name second, then moving it first, then dropping the old one (docs/security.md)."""
    node_firewall: NodeFirewall | None = None
    """The nodes' nftables allow-list of etcd, kubelet and host-network job ports (firewall.py).
    Default None: no table (the stack always sets one unless `kubernetes.nodeFirewall.enabled` is
    false)."""
    bootstrap_token_ttl: str = "24h0m0s"
    """Lifetime `kubeadm init` gives the join token it registers. It only has to cover the minutes
    until the stack's `JoinToken` Secret takes the token over with its own expiry
    (`kubernetes.joinTokenTtlHours`, rotated by the stack); 24h keeps the token expiring even if
    that never happens. "0" never expires (weaker: a standing credential for joining nodes)."""

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
    def sandbox_image(self) -> str:
        """The pod sandbox (pause) image containerd runs: kubeadm's own pause for this minor, from
        the mirror when there is one (the bootstrap writes it into containerd's config)."""
        pause = kubeadm_pins(int(self.kubernetes_version.removeprefix("v").split(".")[1])).pause
        return f"{(self.image_repository or DEFAULT_IMAGE_REPOSITORY).rstrip('/')}/pause:{pause}"

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
    secrets_encryption_keys: Mapping[str, str] = field(default_factory=dict)
    """Base64 of each Secrets encryption key by name (`ClusterSpec.secrets_encryption_key_names`)."""


def host_port(host: str, port: int) -> str:
    """`host:port`, an IPv6 address in brackets."""
    try:
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]:{port}"
    except ValueError:
        pass
    return f"{host}:{port}"


def control_plane_peers(spec: ClusterSpec, node: ClusterNode) -> list[str]:
    """`host:port` of every other control-plane node's API server (management address, bind port).

    What the first control-plane node probes before `kubeadm init`: an answer there means the
    cluster already runs and this VM replaces its first node. Empty with one control-plane node.
    """
    return [
        host_port(other.management_ip, spec.api_server_port)
        for other in spec.control_plane_nodes
        if other.name != node.name and other.management_ip != node.management_ip
    ]


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
