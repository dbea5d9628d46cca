"""A pool of Kubernetes node VMs cloned from the template: the control plane, or the GPU workers.

Each VM gets a management NIC (vmxnet3) and, on GPU workers, a PVRDMA NIC (`vmxnet3vrdma`) on the
RDMA port group, static addresses through cloud-init metadata (see `first_boot`), its vGPU
profile(s) through our own provider (pulumi-vsphere cannot attach vGPU), all of its memory
reserved when it has a vGPU, and a placement rule. VMs of a pool do not depend on each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from typing import Literal

import pulumi
import pulumi_vsphere as vsphere

from components.vsphere.first_boot import NicAddress, guestinfo_extra_config, metadata_document
from components.vsphere.vgpu import VgpuAttachment

Placement = Literal["vm-host-rules", "anti-affinity", "none"]


@dataclass(frozen=True, kw_only=True)
class PoolNode:
    name: str
    """Short name: the guest's hostname and the stable key of the node's resources."""
    vm_name: str
    """The VM's name in vCenter."""
    management_ip: IPv4Address
    rdma_ip: IPv4Address | None = None
    host: str | None = None
    """ESXi host the VM is created on; `vm-host-rules` placement also pins it there."""
    user_data: pulumi.Input[str] = ""
    """cloud-init user-data (a secret: it carries the bootstrap token)."""


@dataclass(frozen=True, kw_only=True)
class Subnet:
    network_id: pulumi.Input[str]
    cidr: IPv4Network
    gateway: IPv4Address | None = None
    mtu: int | None = None


@dataclass(frozen=True, kw_only=True)
class NodePoolArgs:
    role: Literal["control-plane", "gpu-worker"]
    name_prefix: str
    """Prefix of the names operators see in vCenter (placement rules)."""
    nodes: Sequence[PoolNode]
    datacenter_id: pulumi.Input[str]
    compute_cluster_id: pulumi.Input[str]
    resource_pool_id: pulumi.Input[str]
    datastore_id: pulumi.Input[str]
    folder: pulumi.Input[str]
    """VM folder path relative to the datacenter."""
    template_name: str
    management: Subnet
    dns_servers: Sequence[IPv4Address]
    dns_domain: str
    vcpus: int = 4
    memory_mb: int = 16384
    disk_gb: int = 50
    """Disk size for full clones; a linked clone keeps the template's disk size (it is a delta
    disk on the template's snapshot and cannot be resized at clone time)."""
    rdma: Subnet | None = None
    """The PVRDMA port group; when set, every node gets a `vmxnet3vrdma` NIC on it."""
    vgpu_profiles: Sequence[str] = ()
    """vGPU profiles per node. With any, or with an RDMA NIC, memory is fully reserved and locked
    to max."""
    linked_clone: bool = False
    """Clone from the template's single snapshot: seconds instead of minutes per VM."""
    hardware_version: int = 19
    placement: Placement = "none"
    host_ids: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """ESXi host name to managed object id, for the hosts nodes are pinned to."""
    clone_timeout_minutes: int = 30
    power_timeout_minutes: int = 10
    protect: bool = False
    host_dependencies: Mapping[str, Sequence[pulumi.Resource]] = field(default_factory=dict)
    """ESXi host name to the resources a VM on that host must wait for (its switch membership,
    PVRDMA settings and graphics mode: `RdmaFabric.host_resources`). Default: none. A node with a
    `host` waits only for its own host's, so hosts never serialise each other; a node without one
    can land on any host and waits for all. The dependency also orders removals: Pulumi deletes the
    VM before the host's settings and switch membership."""


def host_dependencies(node: PoolNode, args: NodePoolArgs) -> list[pulumi.Resource]:
    """What a node's VM waits for on the host(s) it may run on (see `host_dependencies`)."""
    if node.host is not None:
        return list(args.host_dependencies.get(node.host, ()))
    return [resource for resources in args.host_dependencies.values() for resource in resources]


@dataclass(frozen=True)
class CloneSource:
    """What every VM of a pool takes from the template, lifted out of the template lookup once per
    pool: lifting it per VM made 15 Outputs per VM that all resolve to the same values."""

    template_uuid: pulumi.Output[str]
    guest_id: pulumi.Output[str]
    firmware: pulumi.Output[str]
    scsi_type: pulumi.Output[str]
    disk_size: pulumi.Input[int]
    disk_thin_provisioned: pulumi.Output[bool]
    disk_eagerly_scrub: pulumi.Output[bool]

    @classmethod
    def of(cls, template: pulumi.Output[vsphere.GetVirtualMachineResult], args: NodePoolArgs) -> CloneSource:
        first_disk = template.disks[0]
        return cls(
            template_uuid=template.id,
            guest_id=template.guest_id,
            firmware=template.firmware,
            scsi_type=template.scsi_type,
            # A linked clone keeps the template's disk size (see NodePoolArgs.disk_gb).
            disk_size=first_disk.size if args.linked_clone else args.disk_gb,
            disk_thin_provisioned=first_disk.thin_provisioned,
            disk_eagerly_scrub=first_disk.eagerly_scrub,
        )


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

    def __init__(self, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:vsphere:NodePool", name, None, opts)
        template = vsphere.get_virtual_machine_output(
            name=args.template_name, datacenter_id=args.datacenter_id, opts=pulumi.InvokeOutputOptions(parent=self)
        )
        source = CloneSource.of(template, args)
        self.nodes = {}
        vms: dict[str, vsphere.VirtualMachine] = {}
        for node in args.nodes:
            vm = self._virtual_machine(name, node, args, source)
            vms[node.name] = vm
            if args.vgpu_profiles:
                VgpuAttachment(
                    f"{name}-{node.name}-vgpu",
                    vm_id=vm.id,
                    vm_name=node.vm_name,
                    profiles=list(args.vgpu_profiles),
                    power_timeout_minutes=args.power_timeout_minutes,
                    opts=pulumi.ResourceOptions(parent=self),
                )
            self.nodes[node.name] = NodeOutputs(
                vm_id=vm.id,
                vm_name=node.vm_name,
                management_ip=str(node.management_ip),
                rdma_ip=str(node.rdma_ip) if node.rdma_ip else None,
                host=node.host,
                vgpu_profiles=list(args.vgpu_profiles),
            )
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
        # The node's host is where the clone is first placed; only vm-host-rules keeps it there.
        first_host = args.host_ids[node.host] if node.host else None
        return vsphere.VirtualMachine(
            f"{name}-{node.name}",
            name=node.vm_name,
            resource_pool_id=args.resource_pool_id,
            datastore_id=args.datastore_id,
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
            hardware_version=args.hardware_version,
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
                template_uuid=source.template_uuid,
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
                # the VM, so the live value always differs. Changing it later must not churn the
                # VM: a node is re-bootstrapped by replacing it, not by editing extraConfig.
                ignore_changes=["extraConfig"],
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
