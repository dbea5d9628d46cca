"""The typed environment: one validated object per stack.

The stack file holds it under the key `vsphere-gpu-cluster:environment`, in camelCase (Pulumi's
convention); fields here are snake_case. Every model is frozen and forbids unknown keys, so a typo
is an error rather than a silently ignored option. Field-level rules live on the fields; rules
that relate several parts of the environment live in `stacks.environment.rules`, where each one reports the
exact key path it is about.
"""

from __future__ import annotations

import re
from ipaddress import IPv4Address, IPv4Network
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from components.k8s.facts import DEFAULT_CALICO_VERSION, DNS_LABEL, SUPPORTED_KUBERNETES_MINORS

# NVIDIA vGPU type names as vSphere lists them: grid_<board>-<framebuffer GB><series>, with an
# optional MIG slice count for A100/H100-class boards (grid_a100-3-20c). Series: A (app streaming),
# B (virtual PC), C (compute: what training needs), Q (workstation).
_VGPU_PROFILE = re.compile(r"^grid_[a-z0-9]+(-[0-9]+)?-[0-9]+[abcq]$")
_K8S_VERSION = re.compile(r"^1\.(\d+)\.(\d+)$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$")



def _dns_label(value: str) -> str:
    if not DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid name: use lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return value


def _vgpu_profile(value: str) -> str:
    if not _VGPU_PROFILE.match(value):
        raise ValueError(
            f"{value!r} is not an NVIDIA vGPU profile name; expected the form vSphere lists, "
            "e.g. grid_t4-16c or grid_a100-3-20c (lowercase, 'grid_' prefix)"
        )
    return value


def _kubernetes_version(value: str) -> str:
    match = _K8S_VERSION.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a Kubernetes version; write it as 1.MINOR.PATCH, e.g. 1.34.2")
    minor = int(match.group(1))
    if minor not in SUPPORTED_KUBERNETES_MINORS:
        raise ValueError(
            f"Kubernetes 1.{minor} is not supported by the bootstrap; use 1.{SUPPORTED_KUBERNETES_MINORS.start}"
            f" to 1.{SUPPORTED_KUBERNETES_MINORS.stop - 1}"
        )
    return value


def _pinned_image(value: str) -> str:
    """`[registry[:port]/]path[:tag][@sha256:digest]` with a tag other than latest, or a digest."""
    name, _, digest = value.partition("@")
    last_segment = name.rsplit("/", 1)[-1]
    tag = last_segment.partition(":")[2] if ":" in last_segment else ""
    well_formed = bool(name) and not any(c.isspace() for c in value) and (not digest or _DIGEST.match(digest))
    pinned = bool(digest) or (bool(_TAG.match(tag)) and tag != "latest")
    if not (well_formed and pinned and (not tag or _TAG.match(tag))):
        raise ValueError(f"{value!r} must be pinned to a tag or digest other than 'latest', e.g. repo/image:1.2.3")
    return value


def _quantity(value: str) -> str:
    if not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity; write e.g. 8Gi or 512Mi")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
VgpuProfile = Annotated[str, AfterValidator(_vgpu_profile)]
KubernetesVersion = Annotated[str, AfterValidator(_kubernetes_version)]
PinnedImage = Annotated[str, AfterValidator(_pinned_image)]
Quantity = Annotated[str, AfterValidator(_quantity)]
NonEmpty = Annotated[str, Field(min_length=1)]


class Model(BaseModel):
    """Frozen, camelCase in YAML, unknown keys rejected."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        # camelCase only: the same spelling the JSON Schema (and so editors) accept.
        alias_generator=to_camel,
        use_attribute_docstrings=True,
    )


class VcenterInventory(Model):
    """Where in vCenter the environment lives. Names as shown in the vSphere client."""

    datacenter: NonEmpty
    compute_cluster: NonEmpty
    datastore: NonEmpty
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


class GpuHost(Model):
    """One ESXi host with a GPU and a ConnectX (RoCE) NIC."""

    name: NonEmpty
    """The host's name in vCenter."""
    rdma_vmnics: list[NonEmpty]
    """The RDMA uplink; exactly one, because PVRDMA does not support NIC teaming."""
    vmknic_ip: IPv4Address
    """Static address of this host's PVRDMA VMkernel adapter on the RDMA subnet."""


class RdmaNetwork(Model):
    """The distributed switch and port group that carry PVRDMA traffic."""

    switch_name: NonEmpty
    switch_version: str = "8.0.0"
    """Distributed switch version; every host must be at least this ESXi version."""
    port_group_name: NonEmpty
    vlan_id: int = Field(default=0, ge=0, le=4094)
    subnet: IPv4Network
    gateway: IPv4Address | None = None
    mtu: int = Field(default=9000, ge=1280, le=9000)
    """Switch MTU; 9000 (jumbo frames) is what RoCE wants."""
    vmknic_mtu: int = Field(default=9000, ge=1280, le=9000)
    lldp: Literal["listen", "advertise", "both", "none"] = "both"
    """LLDP on the switch, so the physical switch ports can be traced from vCenter."""


class ManagementNetwork(Model):
    """The existing VM network every node's first NIC joins."""

    network_name: NonEmpty
    """Existing port group name for management traffic."""
    subnet: IPv4Network
    gateway: IPv4Address
    dns_servers: list[IPv4Address] = Field(min_length=1)
    dns_domain: NonEmpty


class HostGraphics(Model):
    manage: bool = True
    """Set each GPU host's default graphics type to Shared Direct (vGPU). When false, the hosts
    must already be in that mode and the program only checks it."""


class NodeSpec(Model):
    name: DnsLabel
    """Short node name; the VM is named `<vm.namePrefix>-<name>` and the Kubernetes node `<name>`."""
    management_ip: IPv4Address
    rdma_ip: IPv4Address | None = None
    """Address of the PVRDMA NIC (GPU workers only)."""
    host: str | None = None
    """ESXi host of a GPU worker: with `placement: vm-host-rules` it is pinned there by a mandatory
    DRS rule; otherwise the VM is only first placed there and DRS may move it."""


class NodePool(Model):
    vcpus: int = Field(default=4, ge=1, le=768)
    memory_mb: int = Field(default=16384, ge=1024)
    disk_gb: int = Field(default=50, ge=20)
    nodes: list[NodeSpec] = Field(min_length=1)
    """The pool's nodes; names are stable keys, so reordering this list replaces nothing."""


class WorkerPool(NodePool):
    memory_mb: int = Field(default=24576, ge=1024)
    vgpu_profiles: list[VgpuProfile] = Field(default_factory=lambda: ["grid_t4-16c"], min_length=1)
    """vGPU profiles attached to each worker, one virtual GPU each."""
    memory_reservation_mb: int | None = None
    """vGPU VMs need all of their memory reserved; leave unset (it follows `memoryMb`)."""
    placement: Literal["vm-host-rules", "anti-affinity", "none"] = "vm-host-rules"
    """vm-host-rules: each worker pinned to its `host` (one per host, strict); anti-affinity: DRS
    keeps workers on different hosts of its choosing; none: DRS decides."""


class VmSettings(Model):
    name_prefix: DnsLabel
    linked_clone: bool = False
    """Clone from `vcenter.templateSnapshot`: seconds per VM instead of minutes, but the disks stay
    tied to the template and cannot be larger than its disk."""
    hardware_version: int = Field(default=19, ge=13)
    """Lowest virtual hardware version; PVRDMA needs 13+, PVRDMA namespaces on vSphere 7 need 17+.
    A template at a newer version keeps its own (vSphere cannot downgrade a VM)."""
    clone_timeout_minutes: int = Field(default=30, ge=1)
    power_timeout_minutes: int = Field(default=10, ge=1)
    """How long a vGPU profile change waits for VMware Tools, then for the guest to shut down; it
    never powers a guest off hard."""


def _manifest_url(value: str) -> str:
    # It travels in the node's environment file, which systemd and the shell both read.
    if not re.match(r"^https://[^\s'\"$`\\]+$", value):
        raise ValueError(
            f"{value!r} is not usable: give an https:// URL without spaces, quotes, '$', '`' or '\\', "
            "e.g. https://mirror.example/calico/v3.31.3/tigera-operator.yaml"
        )
    return value


class Cni(Model):
    name: Literal["calico"] = "calico"
    version: Annotated[str, Field(pattern=r"^v\d+\.\d+\.\d+$")] = DEFAULT_CALICO_VERSION
    """Calico release; v3.31 supports Kubernetes 1.32-1.35 (see docs/bootstrap.md)."""
    operator_manifest_url: Annotated[str, AfterValidator(_manifest_url)] | None = None
    """Where the first control-plane node fetches Calico's `tigera-operator.yaml`; default: the
    release's manifest on raw.githubusercontent.com. Set a mirror for air-gapped sites (and mirror
    Calico's images too)."""


class KubernetesSettings(Model):
    mode: Literal["bootstrap", "existing"] = "bootstrap"
    """bootstrap: kubeadm on the VMs; existing: target the cluster whose kubeconfig is the secret
    `vsphere-gpu-cluster:kubeconfig` (the VMs are still built, but not joined)."""
    version: KubernetesVersion = "1.34.2"
    pod_cidr: IPv4Network = IPv4Network("10.244.0.0/16")
    service_cidr: IPv4Network = IPv4Network("10.96.0.0/12")
    control_plane_endpoint: str | None = None
    """DNS name or VIP of the API server; needed with more than one control-plane node (an
    external load balancer), defaults to the single control-plane node's address."""
    cni: Cni = Cni()
    gpu_node_taint: bool = True
    """Taint GPU workers `nvidia.com/gpu=present:NoSchedule` so only GPU work lands there."""
    ssh_authorized_keys: list[str] = Field(default_factory=list)
    api_ready_timeout_minutes: int = Field(default=20, ge=1)
    drain_timeout_minutes: int = Field(default=15, ge=1, le=24 * 60)
    """How long a GPU worker being removed (scale in, or a VM replaced) may take to drain: evictions
    a PodDisruptionBudget refuses are retried until then, after which the removal fails and the VM
    stays. Longer waits out slow reschedules; shorter surfaces a budget that never allows one."""
    join_token_ttl_hours: int = Field(default=168, ge=2, le=87600)
    """Lifetime of the kubeadm join token the stack keeps in the cluster (Secret
    `kube-system/bootstrap-token-<id>`); the first `pulumi up` after half of it passed issues a
    new one. Shorter narrows the window for a leaked token; longer rotates less often."""


class GpuOperatorSettings(Model):
    chart_version: Annotated[str, Field(pattern=r"^v\d+\.\d+\.\d+$")] = "v26.7.0"
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
    gpu_operator: GpuOperatorSettings | None = None


class RdmaSoftware(Model):
    resource_name: DnsLabel = "pvrdma"
    resource_prefix: DnsLabel = "rdma"
    hca_max: int = Field(default=64, ge=1)
    """How many pods may share the PVRDMA device on one node."""
    vendors: list[str] = Field(default_factory=lambda: ["15ad"])
    device_ids: list[str] = Field(default_factory=lambda: ["0820"])
    drivers: list[str] = Field(default_factory=lambda: ["vmw_pvrdma"])


class MpiOperatorSettings(Model):
    version: Literal["0.8.2", "0.8.0"] = "0.8.2"
    """The release whose kubeflow.org/v2beta1 manifest is installed; 0.8.2 (July 2026) and 0.8.0
    share the CRD schema the tests check against."""
    placement: Literal["control-plane", "any-node"] = "control-plane"
    """Where the controller runs. control-plane: on kubeadm's control-plane nodes (selects their
    label, tolerates their taint); any-node: any node whose taints it tolerates (use it for an
    existing cluster whose control plane is not schedulable or not visible)."""
    crd_url: str | None = None
    """Where the provider fetches the MPIJob CRD from; default the release's file on GitHub
    (set a mirror when the deploying machine cannot reach GitHub)."""


class SampleJob(Model):
    enabled: bool = False
    """Run the benchmark. Default false: it wants the same GPUs as the fabric check, which runs
    first; switch this on (and the check off) once the check has passed."""
    benchmark: Literal["pytorch-ddp", "tf-cnn-benchmarks"] = "pytorch-ddp"
    """Which benchmark runs: pytorch-ddp (PyTorch DDP ResNet-50 on synthetic data from NVIDIA's
    PyTorch image) or tf-cnn-benchmarks (the reference design's Horovod job; legacy: Horovod and
    tf_cnn_benchmarks are no longer maintained)."""
    image: PinnedImage | None = None
    """Image of launcher and workers; default per benchmark: nvcr.io/nvidia/pytorch:25.06-py3 or
    horovod/horovod:0.28.1."""
    model: NonEmpty = "resnet50"
    """tf_cnn_benchmarks `--model` (tf-cnn-benchmarks only; pytorch-ddp always runs ResNet-50)."""
    batch_size: int = Field(default=32, ge=1)
    """Images per GPU per step (the reference design's 32)."""
    num_batches: int = Field(default=100, ge=1)
    """Timed steps."""
    slots_per_worker: int = Field(default=1, ge=1)
    """MPI ranks per worker; one per vGPU (cannot exceed `gpuWorkers.vgpuProfiles`)."""
    shm_size: Quantity = "8Gi"
    """Size of the memory-backed /dev/shm of each worker (Docker's 64 MB default is too small for NCCL)."""
    script_path: str | None = None
    """tf-cnn-benchmarks only: path of tf_cnn_benchmarks.py inside `image`. Set, the workers do not
    clone the script from GitHub (for images with it baked in, or sites without egress)."""


class FabricCheck(Model):
    enabled: bool = True
    image: PinnedImage | None = None
    """Image with nccl-tests; default: the pinned image the job builder documents."""
    link_gbps: float = Field(default=100, gt=0)
    """Line rate of the RDMA uplinks in Gb/s (100 GbE = 12.5 GB/s); bus bandwidth is judged against it."""
    min_bus_bandwidth_share: float = Field(default=0.8, ge=0, le=1)
    """Over RoCE the check fails below this share of the link rate (peak all_reduce bus
    bandwidth). A good bare-metal all_reduce reaches about 0.97; PVRDMA costs a few per cent."""


def _env_name(value: str) -> str:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", value):
        raise ValueError(f"{value!r} is not an environment variable name: letters, digits and '_', not starting with a digit")
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]


class Jobs(Model):
    transport: Literal["roce", "tcp"] = "roce"
    """How NCCL talks between workers in every job: roce over the PVRDMA device, tcp over the
    PVRDMA NIC's own interface (host network), so both cross the same link."""
    namespace: DnsLabel = "training"
    workers: int | None = Field(default=None, ge=1)
    """GPU worker pods per job; default every GPU worker (set 1 for a single-node baseline)."""
    extra_env: dict[EnvName, str] = Field(default_factory=dict)
    """More environment variables for every rank of every job; they override the transport's
    settings (e.g. `NCCL_IB_GID_INDEX: "3"`, `NCCL_DEBUG: WARN`)."""
    sample: SampleJob = SampleJob()
    fabric_check: FabricCheck = FabricCheck()


class Environment(Model):
    """Everything one stack (environment) differs in."""

    name: DnsLabel
    protect: bool = False
    """Protect switch, port group and VMs from `pulumi destroy` (on in prod)."""
    vcenter: VcenterInventory
    vm: VmSettings
    hosts: list[GpuHost] = Field(min_length=1)
    rdma_network: RdmaNetwork
    management_network: ManagementNetwork
    host_graphics: HostGraphics = HostGraphics()
    control_plane: NodePool
    gpu_workers: WorkerPool
    kubernetes: KubernetesSettings = KubernetesSettings()
    gpu: GpuSoftware = GpuSoftware()
    rdma: RdmaSoftware = RdmaSoftware()
    mpi_operator: MpiOperatorSettings = MpiOperatorSettings()
    jobs: Jobs = Jobs()

    def vm_name(self, node: NodeSpec) -> str:
        return f"{self.vm.name_prefix}-{node.name}"
