"""From the validated environment to component arguments.

Components never import `stacks`: this module is the one place that knows both the stack file's
shape and the components' arguments, so either side can change without the other. It creates no
resources: `__main__.py` builds each component from the arguments returned here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pulumi
import pulumi_vsphere as vsphere
from pydantic.alias_generators import to_camel

from components.vsphere.node_pool import NodePool as NodePoolComponent
from components.vsphere.node_pool import NodePoolArgs, Placement, PoolNode, Subnet
from components.vsphere.rdma_fabric import RdmaFabricArgs, RdmaHost
from stacks.environment.model import Environment, NodePool


@dataclass(frozen=True)
class Inventory:
    """What already exists in vCenter, looked up by name."""

    datacenter_id: pulumi.Output[str]
    compute_cluster_id: pulumi.Output[str]
    resource_pool_id: pulumi.Output[str]
    datastore_id: pulumi.Output[str]
    management_network_id: pulumi.Output[str]
    host_ids: dict[str, pulumi.Output[str]]


def lookup_inventory(env: Environment) -> Inventory:
    vc = env.vcenter
    # Lifted once: every lookup below needs it, one per ESXi host among them.
    datacenter_id = vsphere.get_datacenter_output(name=vc.datacenter).id
    cluster = vsphere.get_compute_cluster_output(name=vc.compute_cluster, datacenter_id=datacenter_id)
    if vc.resource_pool:
        pool_id = vsphere.get_resource_pool_output(name=vc.resource_pool, datacenter_id=datacenter_id).id
    else:
        pool_id = cluster.resource_pool_id
    return Inventory(
        datacenter_id=datacenter_id,
        compute_cluster_id=cluster.id,
        resource_pool_id=pool_id,
        datastore_id=vsphere.get_datastore_output(name=vc.datastore, datacenter_id=datacenter_id).id,
        management_network_id=vsphere.get_network_output(
            name=env.management_network.network_name, datacenter_id=datacenter_id
        ).id,
        host_ids={
            host.name: vsphere.get_host_output(name=host.name, datacenter_id=datacenter_id).id for host in env.hosts
        },
    )


def rdma_fabric_args(env: Environment, inventory: Inventory) -> RdmaFabricArgs:
    net = env.rdma_network
    uses_vgpu = bool(env.gpu_workers.vgpu_profiles)
    return RdmaFabricArgs(
        datacenter_id=inventory.datacenter_id,
        switch_name=net.switch_name,
        port_group_name=net.port_group_name,
        switch_version=net.switch_version,
        vlan_id=net.vlan_id,
        mtu=net.mtu,
        vmknic_mtu=net.vmknic_mtu,
        lldp=net.lldp,
        rdma_subnet=str(net.subnet),
        host_graphics=("manage" if env.host_graphics.manage else "check") if uses_vgpu else "leave",
        protect=env.protect,
        hosts=[
            RdmaHost(
                name=host.name,
                host_id=inventory.host_ids[host.name],
                rdma_vmnic=host.rdma_vmnics[0],
                vmknic_ip=str(host.vmknic_ip),
                vmknic_netmask=str(net.subnet.netmask),
            )
            for host in env.hosts
        ],
    )


def vm_folder_args(env: Environment, inventory: Inventory) -> vsphere.FolderArgs:
    """The environment's VM folder; its parent folders must already exist (they are shared)."""
    return vsphere.FolderArgs(path=env.vcenter.folder, type="vm", datacenter_id=inventory.datacenter_id)


def _pool_args(
    env: Environment,
    pool: NodePool,
    inventory: Inventory,
    folder: vsphere.Folder,
    user_data: dict[str, pulumi.Output[str]],
    *,
    role: Literal["control-plane", "gpu-worker"],
    placement: Placement,
    template_name: str,
    rdma: Subnet | None = None,
    vgpu_profiles: Sequence[str] = (),
    host_ids: Mapping[str, pulumi.Input[str]] | None = None,
    host_dependencies: Mapping[str, Sequence[pulumi.Resource]] | None = None,
    gates: Mapping[str, pulumi.CustomResource] | None = None,
    template_uuids: Mapping[str, pulumi.Input[str]] | None = None,
) -> NodePoolArgs:
    """NodePoolArgs built with keywords (mypy checks every name), shared by both pools."""
    mgmt = env.management_network
    return NodePoolArgs(
        role=role,
        placement=placement,
        template_name=template_name,
        rdma=rdma,
        vgpu_profiles=vgpu_profiles,
        host_ids=host_ids or {},
        host_dependencies=dict(host_dependencies or {}),
        replacement_keys={node.name: gates[node.name] for node in pool.nodes if gates},
        template_uuids=dict(template_uuids or {}),
        name_prefix=env.vm.name_prefix,
        nodes=[
            PoolNode(
                name=node.name,
                vm_name=env.vm_name(node),
                management_ip=node.management_ip,
                rdma_ip=node.rdma_ip,
                host=node.host,
                user_data=user_data.get(node.name, ""),
            )
            for node in pool.nodes
        ],
        datacenter_id=inventory.datacenter_id,
        compute_cluster_id=inventory.compute_cluster_id,
        resource_pool_id=inventory.resource_pool_id,
        datastore_id=inventory.datastore_id,
        folder=folder.path,
        management=Subnet(network_id=inventory.management_network_id, cidr=mgmt.subnet, gateway=mgmt.gateway),
        dns_servers=mgmt.dns_servers,
        dns_domain=mgmt.dns_domain,
        vcpus=pool.vcpus,
        memory_mb=pool.memory_mb,
        disk_gb=pool.disk_gb,
        linked_clone=env.vm.linked_clone,
        hardware_version=env.vm.hardware_version,
        clone_timeout_minutes=env.vm.clone_timeout_minutes,
        power_timeout_minutes=env.vm.power_timeout_minutes,
        protect=env.protect,
    )


def control_plane_args(
    env: Environment,
    inventory: Inventory,
    folder: vsphere.Folder,
    user_data: dict[str, pulumi.Output[str]],
    gates: Mapping[str, pulumi.CustomResource] | None = None,
) -> NodePoolArgs:
    """`gates`: per node, its rolling-update gate, whose replacement replaces the VM."""
    return _pool_args(
        env,
        env.control_plane,
        inventory,
        folder,
        user_data,
        role="control-plane",
        placement="anti-affinity",
        template_name=env.vcenter.template,
        gates=gates,
    )


def gpu_worker_args(
    env: Environment,
    inventory: Inventory,
    folder: vsphere.Folder,
    rdma_port_group_id: pulumi.Input[str],
    user_data: dict[str, pulumi.Output[str]],
    host_dependencies: Mapping[str, Sequence[pulumi.Resource]] | None = None,
    gates: Mapping[str, pulumi.CustomResource] | None = None,
    template_uuids: Mapping[str, pulumi.Input[str]] | None = None,
) -> NodePoolArgs:
    """`template_uuids`: per worker, the copy of the GPU template it clones (`stacks.wiring.replicas`)."""
    workers = env.gpu_workers
    return _pool_args(
        env,
        workers,
        inventory,
        folder,
        user_data,
        role="gpu-worker",
        placement=workers.placement,
        # The GPU template carries the workers' vGPU device: it is there at first power-on.
        template_name=env.vcenter.gpu_template or env.vcenter.template,
        rdma=Subnet(network_id=rdma_port_group_id, cidr=env.rdma_network.subnet, mtu=env.rdma_network.vmknic_mtu),
        vgpu_profiles=workers.vgpu_profiles,
        host_ids=inventory.host_ids,
        host_dependencies=host_dependencies,
        gates=gates,
        template_uuids=template_uuids,
    )


def node_exports(*pools: NodePoolComponent) -> dict[str, dict[str, object]]:
    """The `nodes` stack output: per node name its VM and addresses, keys in Pulumi's camelCase."""
    return {
        name: {to_camel(key): value for key, value in vars(node).items()}
        for pool in pools
        for name, node in pool.nodes.items()
    }
