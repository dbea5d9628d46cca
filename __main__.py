"""vsphere-gpu-cluster: a vSphere estate with NVIDIA vGPUs and RoCE NICs, as a Kubernetes cluster
ready for distributed training. One stack per environment; everything it differs in lives in
Pulumi.<stack>.yaml and is validated before any resource is registered."""

import pulumi

from components.vsphere.node_pool import NodePool
from components.vsphere.rdma_fabric import RdmaFabric
from stacks import wiring
from stacks import wiring_kubernetes as k8s_wiring
from stacks.runtime_config import environment_from_stack_config

env = environment_from_stack_config()
inventory = wiring.lookup_inventory(env)

# vSphere: the RDMA fabric and the node VMs. Bootstrap data is computed before the VMs exist
# (it needs only addresses), so only the GPU workers wait on the fabric (their own host's part).
fabric = RdmaFabric("rdma", wiring.rdma_fabric_args(env, inventory))
folder = wiring.vm_folder(env, inventory)
bootstrap = k8s_wiring.bootstrap_if_asked(env)
user_data = bootstrap.user_data if bootstrap else {}
control_plane = NodePool("control-plane", wiring.control_plane_args(env, inventory, folder, user_data))
# Each worker waits for its own host's switch membership, PVRDMA settings and graphics mode.
gpu_workers = NodePool(
    "gpu-workers",
    wiring.gpu_worker_args(env, inventory, folder, fabric.port_group_id, user_data, fabric.host_resources),
)

# Kubernetes: one explicit provider, usable once the API server answers.
cluster = k8s_wiring.cluster_access(env, bootstrap, control_plane)
# Add-ons are independent of each other; the jobs need the MPIJob CRD from the operator.
k8s_wiring.gpu_support(env, cluster)
k8s_wiring.rdma_support(env, cluster)
mpi_operator = k8s_wiring.mpi_operator(env, cluster)
k8s_wiring.training_jobs(env, cluster, mpi_operator)

pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("rdmaSwitchId", fabric.switch_id)
pulumi.export("rdmaPortGroup", fabric.port_group_name)
pulumi.export("pvrdmaVmknics", fabric.vmknic_devices)
pulumi.export(
    "nodes",
    {name: vars(node) for pool in (control_plane, gpu_workers) for name, node in pool.nodes.items()},
)
