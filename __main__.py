"""vsphere-gpu-cluster: a vSphere estate with NVIDIA vGPUs and RoCE NICs, as a Kubernetes cluster
ready for distributed training. One stack per environment; everything it differs in lives in
Pulumi.<stack>.yaml and is validated before any resource is registered."""

import pulumi

from components.vsphere.node_pool import NodePool
from components.vsphere.rdma_fabric import RdmaFabric
from stacks import wiring
from stacks.runtime_config import environment_from_stack_config

env = environment_from_stack_config()
inventory = wiring.lookup_inventory(env)

fabric = RdmaFabric("rdma", wiring.rdma_fabric_args(env, inventory))
folder = wiring.vm_folder(env, inventory)
user_data: dict[str, pulumi.Output[str]] = {}
control_plane = NodePool("control-plane", wiring.control_plane_args(env, inventory, folder, user_data))
gpu_workers = NodePool("gpu-workers", wiring.gpu_worker_args(env, inventory, folder, fabric.port_group_id, user_data))

pulumi.export("rdmaSwitchId", fabric.switch_id)
pulumi.export("rdmaPortGroup", fabric.port_group_name)
pulumi.export("pvrdmaVmknics", fabric.vmknic_devices)
pulumi.export(
    "nodes",
    {name: vars(node) for pool in (control_plane, gpu_workers) for name, node in pool.nodes.items()},
)
