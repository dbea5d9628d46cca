"""The RDMA fabric of one environment: what the reference design's "PVRDMA Configuration"
chapter sets up by hand.

- one distributed switch whose single uplink is each GPU host's ConnectX vmnic (PVRDMA does not
  support NIC teaming, so there is no standby uplink), jumbo MTU and LLDP;
- one distributed port group the VMs' PVRDMA NICs attach to;
- per host: a VMkernel adapter on that port group with the host's RDMA address, and the PVRDMA
  host settings pulumi-vsphere cannot express (`Net.PVRDMAVmknic` tag, `pvrdma` firewall
  ruleset), plus optionally the host's default graphics type for vGPU.

Per-host resources depend on the switch and port group only, never on another host, so hosts are
configured in parallel. Each host's membership of the switch is its own resource (`DvsHostMember`)
that the host's vmknic, and through `host_resources` the VMs placed on the host, depend on:
removing a host then deletes its VMs and vmknic before the host leaves the switch, the only order
vCenter accepts (see `dvs_host_member`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pulumi
import pulumi_vsphere as vsphere

from components.vsphere.dvs_host_member import DvsHostMember
from components.vsphere.host_graphics.resource import HostGraphicsMode
from components.vsphere.pvrdma_host import PvrdmaHostSettings

UPLINK = "uplink-rdma"


@dataclass(frozen=True, kw_only=True)
class RdmaHost:
    name: str
    """The ESXi host's name in vCenter; also the stable key of its resources."""
    host_id: pulumi.Input[str]
    """Managed object id of the host (from `vsphere.get_host`)."""
    rdma_vmnic: str
    """The ConnectX port that becomes the switch's only uplink on this host."""
    vmknic_ip: str
    vmknic_netmask: str


@dataclass(frozen=True, kw_only=True)
class RdmaFabricArgs:
    datacenter_id: pulumi.Input[str]
    """Managed object id of the datacenter the switch is created in (required)."""
    switch_name: str
    """The distributed switch's name in vCenter (required; unique in the datacenter)."""
    port_group_name: str
    """The PVRDMA port group's name in vCenter (required)."""
    rdma_subnet: str
    """The RDMA subnet (network/prefix, required): the hosts' vmknics and the VMs' PVRDMA NICs. Each
    host's `pvrdma` firewall ruleset lets in this subnet only (ESXi opens it to every source)."""
    hosts: Sequence[RdmaHost]
    """The GPU hosts (required). Each becomes a switch member of its own (`DvsHostMember`), gets a
    vmknic, PVRDMA settings and, unless `host_graphics="leave"`, a graphics mode; removing one
    deletes what is on it before it leaves the switch."""
    switch_version: str = "8.0.0"
    """Distributed switch version; every member host must run at least this ESXi version."""
    vlan_id: int = 0
    """VLAN of the PVRDMA port group; 0 means untagged."""
    mtu: int = 9000
    """Switch MTU; RoCE wants jumbo frames end to end."""
    vmknic_mtu: int = 9000
    """MTU of each host's PVRDMA vmknic; at most `mtu`. Default 9000 (jumbo, like the switch)."""
    lldp: Literal["listen", "advertise", "both", "none"] = "both"
    """LLDP operation on the switch (vSphere's `LinkDiscoveryProtocolConfig.operation`)."""
    host_graphics: Literal["manage", "check", "leave"] = "leave"
    """manage: set each host's default graphics type to Shared Direct (vGPU) and restart the host's
    `xorg` service so the GPU runs in it; this needs the GPU's VMs powered off (true on a fresh
    deployment: workers wait for it), else `up` fails naming them. check: change nothing, fail
    early when a host's GPU does not run in Shared Direct (for estates whose hosts are managed by
    hand). leave (default): do not look (no vGPU in this environment)."""
    protect: bool = False
    """Protect the switch and port group against deletion (prod)."""


def vmknic_device(vnic_id: str) -> str:
    """pulumi-vsphere ids a vmknic as `<host moref>_<device>`; the PVRDMA tag wants the device."""
    return vnic_id.rsplit("_", 1)[-1]


class RdmaFabric(pulumi.ComponentResource):
    switch_id: pulumi.Output[str]
    """Id of the distributed switch (its UUID, which port groups and vmknics refer to)."""
    port_group_id: pulumi.Output[str]
    """Managed object id of the PVRDMA port group: the network VMs' PVRDMA NICs attach to."""
    port_group_name: pulumi.Output[str]
    vmknic_devices: dict[str, pulumi.Output[str]]
    """Per host name, the device name of its PVRDMA vmknic (e.g. `vmk1`)."""
    host_resources: dict[str, list[pulumi.Resource]]
    """Per host name, what a VM on that host must wait for: the host's switch membership, its
    PVRDMA settings and (unless `host_graphics="leave"`) its graphics mode. Give it to the GPU
    workers' `NodePoolArgs.host_dependencies`: the VM is then created after them and deleted before
    them."""

    def __init__(self, name: str, args: RdmaFabricArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:vsphere:RdmaFabric", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        guarded = pulumi.ResourceOptions(parent=self, protect=args.protect)

        switch = vsphere.DistributedVirtualSwitch(
            f"{name}-switch",
            name=args.switch_name,
            datacenter_id=args.datacenter_id,
            version=args.switch_version,
            max_mtu=args.mtu,
            uplinks=[UPLINK],
            active_uplinks=[UPLINK],
            standby_uplinks=[],
            link_discovery_protocol="lldp",
            link_discovery_operation=args.lldp,
            # Members are DvsHostMember resources (below). Existing stacks keep the hosts they
            # listed here: ignore_changes keeps the old input, and the bridge drops `host` from
            # the Terraform diff (pulumi-terraform-bridge processIgnoreChanges), so the switch
            # itself never adds or removes a member.
            hosts=[],
            opts=pulumi.ResourceOptions.merge(guarded, pulumi.ResourceOptions(ignore_changes=["hosts"])),
        )
        port_group = vsphere.DistributedPortGroup(
            f"{name}-pvrdma",
            name=args.port_group_name,
            distributed_virtual_switch_uuid=switch.id,
            vlan_id=args.vlan_id,
            active_uplinks=[UPLINK],
            standby_uplinks=[],
            opts=guarded,
        )

        self.vmknic_devices = {}
        self.host_resources = {}
        for host in args.hosts:
            member = DvsHostMember(
                f"{name}-member-{host.name}",
                host_name=host.name,
                switch_uuid=switch.id,
                vmnics=[host.rdma_vmnic],
                opts=child,
            )
            vnic = vsphere.Vnic(
                f"{name}-vmk-{host.name}",
                host=host.host_id,
                distributed_switch_port=switch.id,
                distributed_port_group=port_group.id,
                ipv4=vsphere.VnicIpv4Args(ip=host.vmknic_ip, netmask=host.vmknic_netmask),
                mtu=args.vmknic_mtu,
                # A vmknic on a switch port needs its host on the switch; the dependency also
                # deletes the vmknic before the host leaves the switch.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[member]),
            )
            device = vnic.id.apply(vmknic_device)
            settings = PvrdmaHostSettings(
                f"{name}-pvrdma-{host.name}",
                host_name=host.name,
                vmknic_device=device,
                allowed_network=args.rdma_subnet,
                opts=child,
            )
            resources: list[pulumi.Resource] = [member, settings]
            if args.host_graphics != "leave":
                resources.append(
                    HostGraphicsMode(
                        f"{name}-graphics-{host.name}",
                        host_name=host.name,
                        manage=args.host_graphics == "manage",
                        opts=child,
                    )
                )
            self.vmknic_devices[host.name] = device
            self.host_resources[host.name] = resources

        self.switch_id = switch.id
        self.port_group_id = port_group.id
        self.port_group_name = port_group.name
        self.register_outputs(
            {
                "switch_id": self.switch_id,
                "port_group_id": self.port_group_id,
                "port_group_name": self.port_group_name,
                "vmknic_devices": self.vmknic_devices,
            }
        )
