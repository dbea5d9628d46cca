"""The typed environment: one validated object per stack.

The stack file holds it under the key `vsphere-gpu-cluster:environment`, in camelCase (Pulumi's
convention); fields here are snake_case. Every model is frozen and forbids unknown keys, so a typo
is an error rather than a silently ignored option. Field-level rules live on the fields; rules
that relate several parts of the environment live in `stacks.environment.rules`, where each one reports the
exact key path it is about.
"""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from components.k8s.facts import DEFAULT_CALICO_VERSION, DNS_LABEL, DNS_SUBDOMAIN, SUPPORTED_KUBERNETES_MINORS
from components.k8s.version_policy import default_calico
from stacks.environment.base import Model
from stacks.environment.fields import (
    DVS_VERSIONS,
    HARDWARE_VERSIONS,
    MIN_CLONE_TIMEOUT_MINUTES,
    SSH_KEY_TYPES,
    Address,
    CloneTimeout,
    DistinctDnsLabels,
    DnsLabel,
    DnsSubdomain,
    DvsVersion,
    HardwareVersion,
    HostOrIp,
    KubernetesVersion,
    ManifestUrl,
    Network,
    NonEmpty,
    PciId,
    PinnedImage,
    RdmaResourceName,
    SshPublicKey,
    VgpuProfile,
    Vmnic,
    vgpu_board_and_series,
)
from stacks.environment.jobs import FabricCheck, Jobs, MpiOperatorSettings, SampleJob
from stacks.environment.mirror import Mirror
from stacks.environment.monitoring import Monitoring
from stacks.environment.pulumi_up import PulumiUpSettings
from stacks.environment.replicas import TemplateReplica
from stacks.environment.tuning import Tuning

# Names defined elsewhere but long importable from here; others' code may still import them.
__all__ = [
    "DNS_LABEL",
    "DNS_SUBDOMAIN",
    "DVS_VERSIONS",
    "HARDWARE_VERSIONS",
    "MIN_CLONE_TIMEOUT_MINUTES",
    "SSH_KEY_TYPES",
    "SUPPORTED_KUBERNETES_MINORS",
    "Environment",
    "FabricCheck",
    "Jobs",
    "Model",
    "MpiOperatorSettings",
    "SampleJob",
    "vgpu_board_and_series",
]


class VcenterInventory(Model):
    """Where in vCenter the environment lives. Names as shown in the vSphere client."""

    datacenter: NonEmpty
    """Datacenter holding the cluster, the hosts and the management network (must exist)."""
    compute_cluster: NonEmpty
    """DRS cluster of the GPU hosts (must exist); placement rules are created in it."""
    datastore: NonEmpty
    """Datastore for the VMs' disks (must exist, with room for every full clone)."""
    folder: NonEmpty
    """VM folder path (created by the program), e.g. `gpu-cluster/dev`."""
    resource_pool: str | None = None
    """Resource pool path inside the cluster; default: the cluster's root pool."""
    template: NonEmpty
    """The RHEL-family template VM the nodes are cloned from (see docs/bootstrap.md)."""
    gpu_template: str | None = None
    """The template GPU workers are cloned from: the same guest as `template`, plus one NVIDIA vGPU
    device (vmiop) per profile of `gpuWorkers.vgpuProfiles` and, on large-BAR boards (A100, ...),
    EFI firmware and 64-bit MMIO, so each worker has its GPU at its first power-on and is never
    power-cycled to get it (docs/rdma-host-settings.md). Linked clones need it to have the
    snapshot `templateSnapshot` too. Unset: workers clone `template` as well, which has no vGPU
    device, and their vGPU attachment stops with an error rather than power-cycle a first boot."""
    template_snapshot: str | None = None
    """Snapshot of the template that linked clones hang off; required when `vm.linkedClone`."""
    template_os: Literal["rocky9", "alma9", "rhel9", "rocky8", "alma8", "rhel8"] = "rocky9"
    """The template's OS release; CentOS 7 (the reference design's) is end of life and unsupported."""
    template_replicas: list[TemplateReplica] | Literal["auto"] | None = None
    """Copies of the GPU workers' template the program makes and keeps in step, one per entry;
    each worker clones the copy on its own host, else the nearest one before its host in `hosts`
    (stacks/environment/replicas.py). `auto`: derived from the workers, none up to 15 workers with
    linked clones (7 with full ones), one per 15 (7) workers' hosts beyond (one source host runs 16
    provisioning operations at a time). Default (unset) or `[]`: none, every worker clones the
    template itself. Opt-in: copies change each worker's clone source, so turning them on rolls
    the workers (plan --against says so)."""


class GpuHost(Model):
    """One ESXi host with a GPU and a ConnectX (RoCE) NIC."""

    name: NonEmpty
    """The host's name in vCenter."""
    rdma_vmnics: list[Vmnic]
    """The RDMA uplink; exactly one, because PVRDMA does not support NIC teaming."""
    vmknic_ip: Address
    """Static address of this host's PVRDMA VMkernel adapter on the RDMA subnet."""


class RdmaNetwork(Model):
    """The distributed switch and port group that carry PVRDMA traffic."""

    switch_name: NonEmpty
    """Name of the distributed switch the program creates; unique in the datacenter's networks."""
    switch_version: DvsVersion = "8.0.0"
    """Distributed switch version (quote it: `"8.0.0"`); every host must be at least this ESXi
    version. Default 8.0.0; newer versions need newer hosts."""
    port_group_name: NonEmpty
    """Name of the PVRDMA port group created on the switch; must differ from the switch and from
    the management network."""
    vlan_id: int = Field(default=0, ge=0, le=4094)
    """VLAN of the PVRDMA port group; default 0 (untagged). Written without leading zeros."""
    subnet: Network
    """RDMA subnet (network address, e.g. 192.168.0.0/24): the hosts' vmknics and the workers'
    PVRDMA NICs get static addresses from it."""
    gateway: Address | None = None
    """Gateway on the RDMA subnet; default none (RoCE traffic stays inside the subnet)."""
    mtu: int = Field(default=9000, ge=1280, le=9000)
    """Switch MTU; 9000 (jumbo frames) is what RoCE wants, and the policy pack refuses less."""
    vmknic_mtu: int = Field(default=9000, ge=1280, le=9000)
    """MTU of each host's PVRDMA vmknic and of the workers' PVRDMA NIC; default 9000, at most `mtu`,
    and high enough that RoCE keeps the switch's path MTU (4096 needs at least 4192): a lower one
    only splits every RDMA transfer into smaller packets, so `validate` refuses it."""
    lldp: Literal["listen", "advertise", "both", "none"] = "both"
    """LLDP on the switch, so the physical switch ports can be traced from vCenter."""


class ManagementNetwork(Model):
    """The existing VM network every node's first NIC joins."""

    network_name: NonEmpty
    """Existing port group name for management traffic."""
    subnet: Network
    """Management subnet (network address); every node's `managementIp` is inside it."""
    gateway: Address
    """Default gateway of the nodes."""
    dns_servers: list[Address] = Field(min_length=1)
    """DNS servers of the nodes (one to three; the resolver reads no more), reachable during
    bootstrap: not loopback, not inside the pod or service range."""
    dns_domain: DnsSubdomain
    """DNS domain of the nodes (their search domain; FQDN `<node>.<dnsDomain>`); lowercase, and not
    the cluster's own domain `cluster.local`."""


class HostGraphics(Model):
    manage: bool = True
    """Set each GPU host's default graphics type to Shared Direct (vGPU). When false, the hosts
    must already be in that mode and the program only checks it."""


class NodeSpec(Model):
    name: DnsLabel
    """Short node name; the VM is named `<vm.namePrefix>-<name>` and the Kubernetes node `<name>`."""
    management_ip: Address
    """Static address of the node's management NIC, inside `managementNetwork.subnet`."""
    rdma_ip: Address | None = None
    """Address of the PVRDMA NIC (GPU workers only)."""
    host: str | None = None
    """ESXi host of a GPU worker: with `placement: vm-host-rules` it is pinned there by a mandatory
    DRS rule; otherwise the VM is only first placed there and DRS may move it."""


class NodePool(Model):
    vcpus: int = Field(default=4, ge=1, le=768)
    """Virtual CPUs per VM; default 4 (the reference design's)."""
    memory_mb: int = Field(default=16384, ge=1024)
    """Memory per VM in MB; default 16384 for the control plane."""
    disk_gb: int = Field(default=50, ge=20)
    """System disk per VM in GB; default 50. With linked clones it cannot exceed the template's disk."""
    nodes: list[NodeSpec] = Field(min_length=1)
    """The pool's nodes; names are stable keys, so reordering this list replaces nothing."""


class WorkerPool(NodePool):
    vcpus: int = Field(default=4, ge=1, le=768)
    """Virtual CPUs per GPU worker; default 4."""
    memory_mb: int = Field(default=24576, ge=1024)
    """Memory per GPU worker in MB, all of it reserved (vGPU needs that); default 24576."""
    disk_gb: int = Field(default=50, ge=20)
    """System disk per GPU worker in GB; default 50."""
    vgpu_profiles: list[VgpuProfile] = Field(default_factory=lambda: ["grid_t4-16c"], min_length=1)
    """vGPU profiles attached to each worker, one virtual GPU each: C-series (compute) profiles of
    one board, e.g. grid_t4-16c; default one grid_t4-16c."""
    memory_reservation_mb: int | None = None
    """vGPU VMs need all of their memory reserved; leave unset (it follows `memoryMb`)."""
    placement: Literal["vm-host-rules", "anti-affinity", "none"] = "vm-host-rules"
    """vm-host-rules: each worker pinned to its `host` (one per host, strict); anti-affinity: DRS
    keeps workers on different hosts of its choosing; none: DRS decides."""
    max_unavailable: int = Field(default=1, ge=1, le=3)
    """How many workers a rolling change (template, sizes, vGPU profile) takes down at once; default
    1. More finishes a large pool sooner (one worker takes a clone, a boot and a join) but leaves
    less GPU capacity for the jobs meanwhile. The control plane always goes one node at a time. At
    most 3: every resource of ours is served by one provider process with a bounded worker pool
    (gpucluster:maxConcurrentOperations), and each chain's settle holds a thread while it waits."""


class VmSettings(Model):
    name_prefix: DnsLabel
    """Prefix of every VM (`<namePrefix>-<node>`), DRS rule and the cluster name (`<namePrefix>-k8s`);
    unique per environment."""
    linked_clone: bool = False
    """Clone from `vcenter.templateSnapshot`: seconds per VM instead of minutes, but the disks stay
    tied to the template and cannot be larger than its disk."""
    hardware_version: HardwareVersion = 19
    """Lowest virtual hardware version; PVRDMA needs 13+, PVRDMA namespaces on vSphere 7 need 17+.
    A template at a newer version keeps its own (vSphere cannot downgrade a VM)."""
    clone_timeout_minutes: CloneTimeout = 30
    """How long a clone may take before the provider gives up; default 30, at least 10 (the
    provider's minimum). Full clones of large templates need more."""
    power_timeout_minutes: int = Field(default=10, ge=1)
    """How long a vGPU profile change waits for VMware Tools, then for the guest to shut down; it
    never powers a guest off hard."""


class Cni(Model):
    name: Literal["calico"] = "calico"
    """The CNI plugin; only Calico (through the tigera-operator) is supported."""
    version: Annotated[str, Field(pattern=r"^v3\.\d+\.\d+$")] = DEFAULT_CALICO_VERSION
    """Calico release (a v3 tag, quoted). Default: the release the version policy pins for
    `kubernetes.version`'s minor (v3.31.3 for 1.32-1.35, v3.32.1 for 1.36-1.37; docs/versions.md);
    Tigera tests v3.31 on 1.32-1.35, v3.32 on 1.34-1.36."""
    operator_manifest_url: ManifestUrl | None = None
    """Where the first control-plane node fetches Calico's `tigera-operator.yaml`; default: the
    release's manifest on raw.githubusercontent.com. Set a mirror for air-gapped sites (and mirror
    Calico's images too)."""


class NodeFirewallSettings(Model):
    enabled: bool = True
    """Lay down the nodes' nftables allow-list (etcd, kubelet, host-network job ports for the
    cluster's networks only; docs/security.md). Default true."""
    admin_networks: list[Network] = Field(default_factory=list)
    """Networks operators run kubectl and Pulumi from, when outside the management network: they
    may reach etcd's client port (the stack removes departing members through it) and, once any is
    listed, the API server is reachable only from the cluster's and these networks. Default none."""
    load_balancer_sources: list[Network] = Field(default_factory=list)
    """Where the API server's load balancer connects to the control-plane nodes from: its source-NAT
    addresses and its health checks (a single address as `/32`). With `adminNetworks` listed the
    API server answers only the cluster's, the admin and these networks, so with a load-balanced
    `controlPlaneEndpoint` this key is required (validate refuses it missing). They also reach
    NodePorts. First boot only, like `adminNetworks`. Default none."""


class KubernetesSettings(Model):
    mode: Literal["bootstrap", "existing"] = "bootstrap"
    """bootstrap: kubeadm on the VMs; existing: target the cluster whose kubeconfig is the secret
    `vsphere-gpu-cluster:kubeconfig` (the VMs are still built, but not joined)."""
    version: KubernetesVersion = "1.36.1"
    """Kubernetes release of the bootstrap (quote it: `"1.36.1"`); supported minors 1.32-1.37
    (`components.k8s.version_policy`: validate warns on one past its end of life)."""
    pod_cidr: Network = IPv4Network("10.244.0.0/16")
    """Pod network (kubeadm `podSubnet`, Calico's pool); default 10.244.0.0/16. At most a /24 (each
    node gets a /24 from it) and large enough for a /24 per node."""
    service_cidr: Network = IPv4Network("10.96.0.0/12")
    """Service network; default 10.96.0.0/12, the largest kube-apiserver accepts. Needs room for
    the cluster DNS service at its 10th address (a /28 or larger)."""
    control_plane_endpoint: HostOrIp | None = None
    """DNS name or VIP of the API server; needed with more than one control-plane node (an
    external load balancer), defaults to the single control-plane node's address."""
    cni: Cni = Cni()
    """The pod network plugin (bootstrap mode only)."""
    gpu_node_taint: bool = True
    """Taint GPU workers `nvidia.com/gpu=present:NoSchedule` so only GPU work lands there."""
    ssh_authorized_keys: list[SshPublicKey] = Field(default_factory=list)
    """OpenSSH public keys (one `.pub` line each) for the template's default user; default none."""
    api_ready_timeout_minutes: int = Field(default=20, ge=1)
    """How long to wait for the new API server to answer before failing; default 20 (bootstrap mode)."""
    drain_timeout_minutes: int = Field(default=15, ge=1, le=24 * 60)
    """How long a GPU worker being removed (scale in, or a VM replaced) may take to drain: evictions
    a PodDisruptionBudget refuses are retried until then, after which the removal fails and the VM
    stays. Longer waits out slow reschedules; shorter surfaces a budget that never allows one."""
    rollout_timeout_minutes: int = Field(default=45, ge=5, le=24 * 60)
    """How long one node may take to come back Ready during a rolling change (template, linked
    clone or vGPU profile): a new VM's clone, first boot and join, or a vGPU power cycle. The
    rollout stops at a node that misses it, with the nodes after it untouched. Default 45."""
    node_firewall: NodeFirewallSettings = NodeFirewallSettings()
    """The nodes' own firewall (nftables), see NodeFirewallSettings."""
    secrets_encryption_keys: DistinctDnsLabels = Field(default_factory=lambda: ["key-1"], min_length=1, max_length=4)
    """Names of the keys that encrypt Secrets in etcd (the stack generates 32 random bytes per name,
    kept as Pulumi secrets); the first encrypts, all decrypt. Rotate in three runs, each rolling the
    control plane: add a new name second, move it first (then rewrite every Secret), drop the old
    one (docs/security.md). Default `[key-1]`."""
    @model_validator(mode="after")
    def _calico_follows_the_minor(self) -> KubernetesSettings:
        """Without `cni.version`, the Calico release the version policy pins for the minor
        (`default_calico`). The key still counts as unset (`model_fields_set`) for the rules."""
        calico = None if "version" in self.cni.model_fields_set else default_calico(str(self.version))
        if calico is not None and calico != self.cni.version:
            cni = self.cni.model_copy(update={"version": calico})
            object.__setattr__(cni, "__pydantic_fields_set__", set(self.cni.model_fields_set))
            object.__setattr__(self, "cni", cni)
        return self

    join_token_ttl_hours: int = Field(default=24, ge=2, le=24)
    """Lifetime of the kubeadm join token the stack keeps in the cluster (Secret
    `kube-system/bootstrap-token-<id>`); the first `pulumi up` after half of it passed issues a
    new one. 2 to 24, default 24 (kubeadm's own default token lifetime): the token travels in
    every new VM's user-data, which vCenter keeps in the VM's reconfigure events for anyone who
    may read the VM, a preview account included (issue 53 item 9; docs/security.md), so it must
    not outlive a day. Shorter narrows the window further; a stack not run for half of it issues a
    new token on its next run (only new nodes use it)."""


OLDEST_SAFE_GPU_OPERATOR = (25, 3, 1)
"""GPU Operator charts up to 25.3.0 ship an NVIDIA Container Toolkit hit by CVE-2025-23266 (a
container image reaches host root through the toolkit's hook); 25.3.1 ships 1.17.8 (the CVE
record's affected versions; `components/k8s/gpu_runtime.py`)."""


def _gpu_operator_has_the_toolkit_fix(version: str) -> str:
    parts = tuple(int(p) for p in version.removeprefix("v").split("."))
    if parts < OLDEST_SAFE_GPU_OPERATOR:
        raise ValueError(
            f"{version} installs an NVIDIA Container Toolkit before 1.17.8, through whose hook a container "
            "image reaches host root (CVE-2025-23266); use v25.3.1 or later"
        )
    return version


class GpuOperatorSettings(Model):
    chart_version: Annotated[
        str, Field(pattern=r"^v\d+\.\d+\.\d+$"), AfterValidator(_gpu_operator_has_the_toolkit_fix)
    ] = "v26.7.0"
    """GPU Operator Helm chart version, pinned (quote it); default v26.7.0. At least v25.3.1: older
    charts install an NVIDIA Container Toolkit before 1.17.8 (CVE-2025-23266)."""
    driver_repository: NonEmpty
    """Private registry holding the vGPU guest driver image (NVIDIA does not publish it)."""
    driver_version: NonEmpty
    """vGPU guest driver version; the operator pulls `<driverRepository>/driver:<driverVersion>-<os>`
    with `<os>` `rocky9`/`rhel9`/`rocky8`/`rhel8` (minor dropped) or `almalinux9.<minor>` (kept)."""
    gridd_conf: str = "FeatureType=1"
    """Contents of gridd.conf; licensing itself comes from the NLS client configuration token,
    the secret `vsphere-gpu-cluster:nvidiaLicenseToken`."""


class GpuSoftware(Model):
    mode: Literal["device-plugin", "gpu-operator"] = "device-plugin"
    """device-plugin: the guest driver is in the template; gpu-operator: NVIDIA's operator
    installs the vGPU guest driver from your registry and licenses it."""
    device_plugin_image: PinnedImage = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    """NVIDIA device plugin image, pinned (mode device-plugin only); default v0.20.0 from nvcr.io."""
    gpu_operator: GpuOperatorSettings | None = None
    """GPU Operator settings; required with mode gpu-operator, refused otherwise."""


class RdmaSoftware(Model):
    resource_name: RdmaResourceName = "pvrdma"
    """Name of the RDMA resource pods request (`<resourcePrefix>/<resourceName>`); letters, digits
    and '_'; default pvrdma."""
    resource_prefix: DnsLabel = "rdma"
    """Prefix of the RDMA resource; default rdma (the plugin's own)."""
    hca_max: int = Field(default=64, ge=1)
    """How many pods may share the PVRDMA device on one node."""
    vendors: list[PciId] = Field(default_factory=lambda: ["15ad"])
    """PCI vendor ids the plugin selects (4 lowercase hex digits); default VMware's 15ad."""
    device_ids: list[PciId] = Field(default_factory=lambda: ["0820"])
    """PCI device ids the plugin selects; default 0820, the PVRDMA function."""
    drivers: list[NonEmpty] = Field(default_factory=lambda: ["vmw_pvrdma"])
    """Kernel drivers the plugin selects; default vmw_pvrdma. At least one selector must be set."""


class Environment(Model):
    """Everything one stack (environment) differs in."""

    name: DnsLabel
    """Environment name (a DNS label), e.g. dev."""
    protect: bool = False
    """Protect switch, port group and VMs from `pulumi destroy` (on in prod)."""
    vcenter: VcenterInventory
    """Where in vCenter the environment lives."""
    vm: VmSettings
    """Settings of every VM: name prefix, clone mode, hardware version, timeouts."""
    hosts: list[GpuHost] = Field(min_length=1)
    """The ESXi GPU hosts, each with its RDMA vmnic and PVRDMA vmknic address."""
    rdma_network: RdmaNetwork
    """The distributed switch and port group for PVRDMA."""
    management_network: ManagementNetwork
    """The existing network of every node's first NIC."""
    host_graphics: HostGraphics = HostGraphics()
    """The GPU hosts' graphics mode (Shared Direct for vGPU)."""
    control_plane: NodePool
    """The control-plane VMs (an odd number)."""
    gpu_workers: WorkerPool
    """The GPU worker VMs, their vGPU profiles and placement."""
    kubernetes: KubernetesSettings = KubernetesSettings()
    """The cluster: bootstrapped here or existing, version, networks, endpoint."""
    gpu: GpuSoftware = GpuSoftware()
    """How GPUs reach pods: the device plugin or the GPU Operator."""
    rdma: RdmaSoftware = RdmaSoftware()
    """How the PVRDMA device reaches pods: the RDMA shared device plugin's resource and selectors."""
    mpi_operator: MpiOperatorSettings = MpiOperatorSettings()
    """The Kubeflow MPI Operator release."""
    jobs: Jobs = Jobs()
    """The sample training job and the fabric check."""
    monitoring: Monitoring = Monitoring()
    """GPU health metrics (dcgm-exporter) and the optional minimal Prometheus."""
    tuning: Tuning = Tuning()
    """Kubeflow Trainer v2 and Katib with a sample Experiment; off by default."""
    mirror: Mirror = Mirror()
    """One registry and one file base for an air-gapped site (docs/air-gapped.md); default none."""
    pulumi_up: PulumiUpSettings = PulumiUpSettings()
    """How the deploy workflow runs `pulumi up`: `--parallel`, the runner's CPUs, the state backend."""

    def vm_name(self, node: NodeSpec) -> str:
        return f"{self.vm.name_prefix}-{node.name}"
