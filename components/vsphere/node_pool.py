"""A pool of Kubernetes node VMs cloned from the template: the control plane, or the GPU workers.

Each VM gets a management NIC (vmxnet3) and, on GPU workers, a PVRDMA NIC (`vmxnet3vrdma`) on the
RDMA port group, static addresses through cloud-init metadata (see `first_boot`), all of its
memory reserved when it has a vGPU, and a placement rule. VMs of a pool do not depend on each
other.

vGPU at birth: a GPU worker is cloned from a template that already carries its vGPU device(s)
(vCenter's clone copies the device; pulumi-vsphere's VM ignores vmiop devices, so it neither
removes it nor reports it), so the device is there at the VM's first power-on and nothing ever
power-cycles a first boot. Our `VgpuAttachment` then verifies the profile (and converges it
gracefully on later changes). Why not the alternatives: pulumi-vsphere 4.x has no vGPU argument
and always powers a new VM on at the end of its create (terraform-provider-vsphere,
resourceVSphereVirtualMachinePostDeployChanges), so the device cannot be added in between; our
own clone provider (Cluster API's way, `pciDevices[].vGPUProfile` in the clone spec) would
replace pulumi-vsphere's VM resource and with it every existing node in every stack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from typing import Literal

import pulumi
import pulumi_vsphere as vsphere

from components.vsphere.clone_source import CloneSource, replaced_with
from components.vsphere.first_boot import GUESTINFO_KEYS, NicAddress, guestinfo_extra_config, metadata_document
from components.vsphere.vgpu.attachment import VgpuAttachment
from components.vsphere.vgpu.profiles import vgpu_extra_config

Placement = Literal["vm-host-rules", "anti-affinity", "none"]

ROLLED_PROPERTIES = (
    "clone",
    "numCpus",
    "memory",
    "memoryReservation",
    "hardwareVersion",
    "guestId",
    "firmware",
    "scsiType",
    "disks[0].thinProvisioned",
    "disks[0].eagerlyScrub",
)
"""What a VM with a rolling-update gate takes only at its creation: the node's generation covers
them (`stacks.wiring.rollout`), or they come from the template it hashes. Without this, a change
the generation does not see (the first run with gates, a template changed in place) would replace
or restart every VM at once, and a VM's own replacement would take its old first-boot data (Pulumi
fills ignored properties from the state); a re-created VM (its gate replaced) takes them all anew."""

LINKED_CLONE_ROLLED_PROPERTIES = ("disks[0].size",)
"""Also held on a gated linked clone: its disk is the template's snapshot disk, so its size is the
template's. A template rebuilt with another disk would otherwise grow every VM at once outside the
rollout, or fail the whole diff when smaller (terraform-provider-vsphere's disk subresource,
DiskDiffOperation: "virtual disks cannot be shrunk"). A full clone's size is `disk_gb`, grown in
place on purpose."""

UNPINNED_HOST_PROPERTY = "hostSystemId"
"""Ignored unless `vm-host-rules` pins the VM: pulumi-vsphere reads the VM's current host into it
(terraform-provider-vsphere, resourceVSphereVirtualMachineRead sets `host_system_id` from
`Runtime.Host`), so after each DRS move the next `up` would vMotion the VM back, which fails for a
VM with a vGPU. The node's `host` is then only where its clone is first placed."""


@dataclass(frozen=True, kw_only=True)
class PoolNode:
    name: str
    """Short name: the guest's hostname and the stable key of the node's resources."""
    vm_name: str
    """The VM's name in vCenter."""
    management_ip: IPv4Address
    """Static address of the management NIC (its MAC is derived from it: `first_boot.static_mac`)."""
    rdma_ip: IPv4Address | None = None
    """Static address of the PVRDMA NIC; required when the pool has `rdma`, else unused."""
    host: str | None = None
    """ESXi host the VM is created on; `vm-host-rules` placement also pins it there."""
    user_data: pulumi.Input[str] = ""
    """cloud-init user-data (a secret: it carries the bootstrap token)."""


@dataclass(frozen=True, kw_only=True)
class Subnet:
    network_id: pulumi.Input[str]
    """The port group (network) id the NIC connects to."""
    cidr: IPv4Network
    """The subnet; node addresses get its prefix length."""
    gateway: IPv4Address | None = None
    """Default route via this NIC; None: no default route on it (the RDMA network has none)."""
    mtu: int | None = None
    """MTU set in the guest; None: the guest's default (1500)."""


@dataclass(frozen=True, kw_only=True)
class NodePoolArgs:
    """What a pool of node VMs is made of. Fields without a default are required."""

    role: Literal["control-plane", "gpu-worker"]
    """Names the pool's anti-affinity rule (`<name_prefix>-<role>-apart`); changes nothing else."""
    name_prefix: str
    """Prefix of the names operators see in vCenter (placement rules)."""
    nodes: Sequence[PoolNode]
    """The VMs, keyed by `PoolNode.name`: reordering them replaces nothing, renaming one replaces it."""
    datacenter_id: pulumi.Input[str]
    """Where the template is looked up."""
    compute_cluster_id: pulumi.Input[str]
    """The cluster the placement rules live in."""
    resource_pool_id: pulumi.Input[str]
    """Resource pool of every VM (the cluster's root pool unless the stack names one)."""
    datastore_id: pulumi.Input[str]
    """Datastore of every VM's files and disk (a linked clone's delta disk too)."""
    folder: pulumi.Input[str]
    """VM folder path relative to the datacenter; VM names must be unique in it (vCenter refuses a
    duplicate, which is why VMs are replaced delete-first)."""
    template_name: str
    """The template every VM is cloned from. For a pool with `vgpu_profiles` it must already
    carry one vmiop vGPU device per profile (and, on large-BAR boards, EFI firmware and the
    64-bit MMIO extraConfig of `vgpu_profiles.vgpu_extra_config`): the clone keeps them, so the
    VM has its GPU at its first power-on. Changing it replaces every VM of the pool."""
    management: Subnet
    """The management network: the first NIC, vmxnet3, with the default route and DNS."""
    dns_servers: Sequence[IPv4Address]
    """Resolvers written into the guest's network config."""
    dns_domain: str
    """Search domain written into the guest's network config."""
    vcpus: int = 4
    """vCPUs per VM (default 4, the reference design's). Changing it reconfigures the VM in place
    (pulumi-vsphere powers it off when CPU hot-add is off)."""
    memory_mb: int = 16384
    """Memory per VM in MiB (default 16 GiB). With a vGPU or an RDMA NIC all of it is reserved, so
    each host needs that much free unreserved memory per VM."""
    disk_gb: int = 50
    """Disk size in GB for full clones (default 50, the reference design's); a linked clone keeps
    the template's disk size (it is a delta disk on the template's snapshot and cannot be resized
    at clone time)."""
    rdma: Subnet | None = None
    """The PVRDMA port group; when set, every node gets a `vmxnet3vrdma` NIC on it (default none:
    the control plane)."""
    vgpu_profiles: Sequence[str] = ()
    """vGPU profiles per node (default none). With any, or with an RDMA NIC, memory is fully
    reserved and locked to max; each profile must be offered by the node's host and carried by
    the template. A later change is applied in place by `VgpuAttachment`: a guest shutdown
    through VMware Tools per node, one node at a time (cordon and drain first)."""
    linked_clone: bool = False
    """Clone from the template's single snapshot (default off): seconds instead of minutes per VM
    and little disk, but every VM depends on the template's snapshot and keeps its disk size."""
    hardware_version: int = 19
    """Lowest virtual hardware version (default 19: vSphere 7.0 U2+). A template at a newer version
    gives its own (vSphere cannot downgrade a VM); a newer value here upgrades the clones, and
    raising it later power-cycles every VM through pulumi-vsphere."""
    placement: Placement = "none"
    """`vm-host-rules`: one mandatory VM-host rule per node pinning it to its `host` (strict, one
    GPU per host, blocks maintenance mode for that host); `anti-affinity`: one "should" DRS rule
    keeping the pool's VMs apart (DRS picks the hosts); `none` (default): DRS decides."""
    host_ids: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """ESXi host name to managed object id, for the hosts nodes are created on and pinned to
    (default empty: nodes without a `host`, placed by DRS)."""
    clone_timeout_minutes: int = 30
    """pulumi-vsphere's clone timeout (default 30; a full clone of a large template takes minutes,
    a linked clone seconds); the VM's create timeout is this plus 10."""
    power_timeout_minutes: int = 10
    """On a vGPU profile change: how long to wait for VMware Tools, then for the guest shutdown
    (default 10). Never followed by a hard power-off; a guest that misses it is an error."""
    protect: bool = False
    """Pulumi `protect` on every VM (default off; prod sets it): `pulumi destroy` and replacements
    are refused until it is lifted."""
    host_dependencies: Mapping[str, Sequence[pulumi.Resource]] = field(default_factory=dict)
    """ESXi host name to the resources a VM on that host must wait for (its switch membership,
    PVRDMA settings and graphics mode: `RdmaFabric.host_resources`). Default: none. A node with a
    `host` waits only for its own host's, so hosts never serialise each other; a node without one
    can land on any host and waits for all. The dependency also orders removals: Pulumi deletes the
    VM before the host's settings and switch membership."""
    template_uuids: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Node name to the BIOS UUID of the copy of the template it clones (`TemplateReplicas`): the
    copy nearest its host, so clones spread over the copies' hosts. Default: none, every node
    clones `template_name` itself. A copy has the template's devices, firmware and disk."""
    replacement_keys: Mapping[str, pulumi.Resource] = field(default_factory=dict)
    """Node name to the resource whose replacement replaces the VM (`clone_source.replaced_with`):
    the node's rolling-update gate (`components.k8s.rollout.rollout`). When the gate is replaced
    delete-first, Pulumi deletes the VM before it and re-creates it with the program's current
    inputs, first-boot data included. Such a VM ignores changes to `ROLLED_PROPERTIES`, so nothing
    but its gate replaces or restarts it. Default: none (a change replaces or restarts VMs at once)."""


def host_dependencies(node: PoolNode, args: NodePoolArgs) -> list[pulumi.Resource]:
    """What a node's VM waits for on the host(s) it may run on (see `host_dependencies`)."""
    if node.host is not None:
        return list(args.host_dependencies.get(node.host, ()))
    return [resource for resources in args.host_dependencies.values() for resource in resources]


@dataclass(frozen=True)
class NodeOutputs:
    vm_id: pulumi.Output[str]
    vm_name: str
    management_ip: str
    rdma_ip: str | None
    host: str | None
    vgpu_profiles: list[str]


class NodePool(pulumi.ComponentResource):
    nodes: dict[str, NodeOutputs]
    """Per node name: VM id and name, management and RDMA addresses, host, vGPU profiles."""
    vms: dict[str, pulumi.Resource]
    """Per node name, its VM: for `depends_on` of what waits on one node's VM alone. Depending on
    the pool instead also waits for its placement rules (DRS reconfigurations nothing needs)."""
    changers: dict[str, list[pulumi.Resource]]
    """Per node name, what replaces or power-cycles it: its VM and, with vGPUs, its vGPU device."""

    def __init__(self, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:vsphere:NodePool", name, None, opts)
        template = vsphere.get_virtual_machine_output(
            name=args.template_name, datacenter_id=args.datacenter_id, opts=pulumi.InvokeOutputOptions(parent=self)
        )
        source = CloneSource.of(
            template, linked_clone=args.linked_clone, disk_gb=args.disk_gb, hardware_version=args.hardware_version
        )
        self.nodes = {}
        self.changers = {}
        vms: dict[str, vsphere.VirtualMachine] = {}
        for node in args.nodes:
            vm = self._virtual_machine(name, node, args, source)
            vms[node.name] = vm
            self.changers[node.name] = [vm]
            if args.vgpu_profiles:
                self.changers[node.name].append(
                    VgpuAttachment(
                        f"{name}-{node.name}-vgpu",
                        vm_id=vm.id,
                        vm_name=node.vm_name,
                        profiles=list(args.vgpu_profiles),
                        extra_config=vgpu_extra_config(args.vgpu_profiles),
                        power_timeout_minutes=args.power_timeout_minutes,
                        opts=pulumi.ResourceOptions(parent=self),
                    )
                )
            self.nodes[node.name] = NodeOutputs(
                vm_id=vm.id,
                vm_name=node.vm_name,
                management_ip=str(node.management_ip),
                rdma_ip=str(node.rdma_ip) if node.rdma_ip else None,
                host=node.host,
                vgpu_profiles=list(args.vgpu_profiles),
            )
        self.vms = dict(vms)
        self._placement_rules(name, args, vms)
        self.register_outputs({"nodes": {k: vars(v) for k, v in self.nodes.items()}})

    def _virtual_machine(
        self,
        name: str,
        node: PoolNode,
        args: NodePoolArgs,
        source: CloneSource,
    ) -> vsphere.VirtualMachine:
        nics = [
            NicAddress(
                role="management",
                address=node.management_ip,
                network=args.management.cidr,
                gateway=args.management.gateway,
                mtu=args.management.mtu,
            )
        ]
        interfaces = [
            vsphere.VirtualMachineNetworkInterfaceArgs(
                network_id=args.management.network_id,
                adapter_type="vmxnet3",
                use_static_mac=True,
                mac_address=nics[0].mac,
            )
        ]
        if args.rdma is not None:
            if node.rdma_ip is None:
                raise ValueError(f"node {node.name} of pool {name} needs an RDMA address")
            nics.append(NicAddress(role="rdma", address=node.rdma_ip, network=args.rdma.cidr, mtu=args.rdma.mtu))
            # pulumi-vsphere's docstring says "vrdma"; its validator accepts only "vmxnet3vrdma".
            interfaces.append(
                vsphere.VirtualMachineNetworkInterfaceArgs(
                    network_id=args.rdma.network_id,
                    adapter_type="vmxnet3vrdma",
                    use_static_mac=True,
                    mac_address=nics[1].mac,
                )
            )
        metadata = metadata_document(
            instance_id=node.vm_name,
            hostname=node.name,
            nics=nics,
            dns_servers=list(args.dns_servers),
            dns_domain=args.dns_domain,
        )
        extra_config = pulumi.Output.secret(node.user_data).apply(lambda ud: guestinfo_extra_config(metadata, ud))
        # vGPU VMs cannot power on without all memory reserved, and VMware's PVRDMA set-up
        # reserves all guest memory too (the device pins guest memory for RDMA).
        reserve_all = bool(args.vgpu_profiles) or args.rdma is not None
        trigger = args.replacement_keys.get(node.name)
        # The node's host is where the clone is first placed; only vm-host-rules keeps it there.
        first_host = args.host_ids[node.host] if node.host else None
        return vsphere.VirtualMachine(
            f"{name}-{node.name}",
            name=node.vm_name,
            resource_pool_id=args.resource_pool_id,
            datastore_id=args.datastore_id,
            datastore_path=replaced_with(trigger) if trigger is not None else None,
            folder=args.folder,
            host_system_id=first_host,
            num_cpus=args.vcpus,
            memory=args.memory_mb,
            # Locking to max keeps the reservation right when memory is later resized.
            memory_reservation=args.memory_mb if reserve_all else None,
            memory_reservation_locked_to_max=True if reserve_all else None,
            guest_id=source.guest_id,
            firmware=source.firmware,
            scsi_type=source.scsi_type,
            hardware_version=source.hardware_version,
            enable_disk_uuid=True,
            network_interfaces=interfaces,
            disks=[
                vsphere.VirtualMachineDiskArgs(
                    label="disk0",
                    size=source.disk_size,
                    thin_provisioned=source.disk_thin_provisioned,
                    eagerly_scrub=source.disk_eagerly_scrub,
                )
            ],
            clone=vsphere.VirtualMachineCloneArgs(
                template_uuid=args.template_uuids.get(node.name, source.template_uuid),
                linked_clone=args.linked_clone,
                timeout=args.clone_timeout_minutes,
            ),
            extra_config=extra_config,
            # Readiness is judged by the API server check of the Kubernetes layer; waiting for
            # guest networking here would only delay each VM by the guest's boot time.
            wait_for_guest_net_timeout=0,
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=args.protect,
                depends_on=host_dependencies(node, args),
                # First-boot data is read once; the datasource then blanks guestinfo.userdata in
                # the guest and GuestinfoScrub removes it from the VM once the guest read it, so the
                # live value differs. Changing it later must not churn the VM (nor put the secrets
                # back): a node is re-bootstrapped by replacing it, not by editing extraConfig.
                # The key hand-off's keys, cleared at the clone, are then set by the node and
                # InitPkiDelivery. Only those keys: any other extraConfig stays managed.
                ignore_changes=[
                    *(f'extraConfig["{key}"]' for key in GUESTINFO_KEYS),
                    *(ROLLED_PROPERTIES if trigger is not None else ()),
                    *(LINKED_CLONE_ROLLED_PROPERTIES if trigger is not None and args.linked_clone else ()),
                    *(
                        (UNPINNED_HOST_PROPERTY,)
                        if first_host is not None and args.placement != "vm-host-rules"
                        else ()
                    ),
                ],
                # A replacement (any `clone` change) must delete the old VM first: the new one has
                # the same name in the same folder (vCenter refuses a duplicate: DuplicateName)
                # and the same static MACs and addresses, so the two can never exist at once.
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=f"{args.clone_timeout_minutes + 10}m"),
            ),
        )

    def _placement_rules(self, name: str, args: NodePoolArgs, vms: Mapping[str, vsphere.VirtualMachine]) -> None:
        child = pulumi.ResourceOptions(parent=self)
        if args.placement == "vm-host-rules":
            # One host group, VM group and mandatory rule per node: each rule names only its own
            # VM, so nodes never wait on each other and adding one touches no other rule.
            for node in args.nodes:
                if node.host is None:
                    raise ValueError(f"node {node.name} of pool {name} has no host to be pinned to")
                prefix = f"{node.vm_name}-pin"
                hosts = vsphere.ComputeClusterHostGroup(
                    f"{name}-{node.name}-hosts",
                    name=f"{prefix}-hosts",
                    compute_cluster_id=args.compute_cluster_id,
                    host_system_ids=[args.host_ids[node.host]],
                    opts=child,
                )
                group = vsphere.ComputeClusterVmGroup(
                    f"{name}-{node.name}-vms",
                    name=f"{prefix}-vms",
                    compute_cluster_id=args.compute_cluster_id,
                    virtual_machine_ids=[vms[node.name].id],
                    opts=child,
                )
                vsphere.ComputeClusterVmHostRule(
                    f"{name}-{node.name}-pin",
                    name=prefix,
                    compute_cluster_id=args.compute_cluster_id,
                    vm_group_name=group.name,
                    affinity_host_group_name=hosts.name,
                    mandatory=True,
                    opts=child,
                )
        elif args.placement == "anti-affinity" and len(vms) > 1:
            # A "should" rule: a mandatory one would block host maintenance mode whenever there
            # are as many nodes as hosts.
            vsphere.ComputeClusterVmAntiAffinityRule(
                f"{name}-apart",
                name=f"{args.name_prefix}-{args.role}-apart",
                compute_cluster_id=args.compute_cluster_id,
                virtual_machine_ids=[vm.id for vm in vms.values()],
                mandatory=False,
                opts=child,
            )
