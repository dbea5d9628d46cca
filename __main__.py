"""vsphere-gpu-cluster: a vSphere estate with NVIDIA vGPUs and RoCE NICs, as a Kubernetes cluster
ready for distributed training. One stack per environment; everything it differs in lives in
Pulumi.<stack>.yaml and is validated before any resource is registered.

This file builds every component; `stacks.wiring` only turns the environment into their arguments.
"""

import pulumi
import pulumi_vsphere as vsphere

from components.k8s.addons.device_plugin import GpuDevicePlugin
from components.k8s.addons.kubeflow_tuning import KubeflowTuning
from components.k8s.addons.monitoring import GpuMonitoring
from components.k8s.addons.mpi_operator import MpiOperator
from components.k8s.addons.rdma_plugin import RdmaDevicePlugin
from components.k8s.api.ready import ApiServerReady
from components.k8s.bootstrap import ClusterBootstrap
from components.k8s.cluster_access import ClusterAccess
from components.k8s.etcd.member import ControlPlaneMember
from components.k8s.jobs.training_jobs import TrainingJobs
from components.k8s.jobs.tuning_sample import TuningSample
from components.k8s.join.control_plane import ControlPlaneJoinSecrets
from components.k8s.join.joined import NodeJoined
from components.k8s.join.token import JoinToken
from components.k8s.rollout.drain import NodeDrain
from components.k8s.rollout.rollout import NodeRollout
from components.vsphere.guestinfo_scrub import GuestinfoScrub
from components.vsphere.node_pool import NodePool
from components.vsphere.pki_delivery import InitPkiDelivery
from components.vsphere.rdma_fabric import RdmaFabric
from components.vsphere.template_copies.replicas import TemplateReplicas
from stacks.wiring import kubernetes as k8s_wiring
from stacks.wiring import replicas as replica_wiring
from stacks.wiring import rollout as rollout_wiring
from stacks.wiring import vsphere as vsphere_wiring
from stacks.wiring.cli_version import require_minimum_cli
from stacks.wiring.runtime_config import environment_from_stack_config

require_minimum_cli()  # before anything is registered (stacks/wiring/cli_version.py)
env = environment_from_stack_config()
inventory = vsphere_wiring.lookup_inventory(env)

# vSphere: the RDMA fabric and the node VMs. Bootstrap data is computed before the VMs exist
# (it needs only addresses), so only the GPU workers wait on the fabric (their own host's part).
fabric = RdmaFabric("rdma", vsphere_wiring.rdma_fabric_args(env, inventory))
folder = vsphere.Folder(
    "vm-folder",
    vsphere_wiring.vm_folder_args(env, inventory),
    opts=pulumi.ResourceOptions(protect=env.protect),  # prod protects what holds its VMs
)

# The kubeadm bootstrap of the VMs, or an existing cluster (`kubernetes.mode`).
bootstrap = (
    ClusterBootstrap("bootstrap", k8s_wiring.bootstrap_args(env)) if env.kubernetes.mode == "bootstrap" else None
)
user_data = bootstrap.user_data if bootstrap else {}

# Rolling changes (bootstrap mode: the stack joins new VMs itself): a change to what nodes are made
# of replaces them one at a time, each with fresh first-boot data. Each VM's datastore_path carries
# its node's gate; the gate is replaced (and the VM with it) only once the previous node is back.
# Day one waits for nothing (components/k8s/rollout/rollout.py).
rollout = (
    NodeRollout(rollout_wiring.rollout_steps(env, inventory), rollout_wiring.rollout_args(env, bootstrap))
    if bootstrap is not None
    else None
)
gates = rollout.gates if rollout is not None else None
control_plane = NodePool("control-plane", vsphere_wiring.control_plane_args(env, inventory, folder, user_data, gates))
# Large pools clone copies of the GPU template spread over the hosts (`vcenter.templateReplicas`):
# one source host runs 16 clones at a time. Each worker waits for its own host's switch
# membership, PVRDMA settings and graphics mode.
replica_args = replica_wiring.template_replicas_args(env, inventory)
replicas = TemplateReplicas("gpu-template-copies", replica_args) if replica_args is not None else None
gpu_workers = NodePool(
    "gpu-workers",
    vsphere_wiring.gpu_worker_args(
        env,
        inventory,
        folder,
        fabric.port_group_id,
        user_data,
        fabric.host_resources,
        gates,
        replica_wiring.worker_template_uuids(env, replicas),
    ),
)
if rollout is not None:
    rollout.settle_all(
        {
            name: (node.vm_id, pool.changers[name])
            for pool in (control_plane, gpu_workers)
            for name, node in pool.nodes.items()
        }
    )

# Kubernetes: one explicit provider, usable once the API server answers.
if bootstrap is not None:
    # The init node's keys: sealed to a key that node makes and posts, never in its user-data
    # (components/vsphere/pki_delivery.py). It waits for nothing but that VM.
    init_node = control_plane.nodes[bootstrap.init_node_name]
    InitPkiDelivery(
        f"pki-{bootstrap.init_node_name}",
        vm_id=init_node.vm_id,
        vm_name=init_node.vm_name,
        node_name=bootstrap.init_node_name,
        bundle=bootstrap.init_pki_bundle,
        signing_key=bootstrap.init_pki_signing_key_pem,
        wait_seconds=env.kubernetes.rollout_timeout_minutes * 60,
    )
    ready = ApiServerReady(
        "api-server-ready",
        k8s_wiring.api_ready_args(env, bootstrap),
        # Polling starts once the node that runs `kubeadm init` exists (not the whole pool).
        opts=pulumi.ResourceOptions(depends_on=k8s_wiring.api_ready_dependencies(env, control_plane)),
    )
    # What talks to the cluster waits for the readiness check and for every control-plane VM, so
    # `pulumi destroy` removes it (drains included) before any of them: etcd keeps its quorum.
    api_up: list[pulumi.Resource] = [ready, *control_plane.vms.values()]
    cluster = ClusterAccess("cluster", k8s_wiring.bootstrapped_cluster_args(env, bootstrap, api_up))
    join_token = JoinToken("join-token", k8s_wiring.join_token_args(env, bootstrap, cluster, ready, control_plane))
    # The joining control-plane nodes' keys, fetched by them with a short-lived token, never in
    # their user-data (components/k8s/join/control_plane.py); none with one control-plane node.
    cp_join_args = k8s_wiring.control_plane_join_secrets_args(env, bootstrap, cluster, ready, control_plane)
    cp_join_needs: list[pulumi.Resource] = []
    if cp_join_args is not None:
        cp_join_needs.append(ControlPlaneJoinSecrets("control-plane-join", cp_join_args))
    # Each node waits for its join after the readiness check and the token, so a node waiting
    # never holds up what the joins need. Its first-boot secrets leave its VM's extraConfig once
    # its guest has read them, joined or not (components/vsphere/guestinfo_scrub.py).
    for pool in (control_plane, gpu_workers):
        for node_name, node in pool.nodes.items():
            NodeJoined(
                f"joined-{node_name}",
                k8s_wiring.node_joined_args(env, node_name, node, bootstrap, control_plane=pool is control_plane),
                opts=pulumi.ResourceOptions(
                    depends_on=[
                        pool.vms[node_name],
                        ready,
                        join_token,
                        *(cp_join_needs if pool is control_plane else ()),
                    ]
                ),
            )
            GuestinfoScrub(
                f"scrub-{node_name}",
                vm_id=node.vm_id,
                vm_name=node.vm_name,
                node_name=node_name,
                wait_seconds=env.kubernetes.rollout_timeout_minutes * 60,
            )
    # A control-plane node leaving (scale in, VM replacement) is drained and its etcd member removed
    # through another member, quorum checked, before its VM goes: its new VM reuses the member's
    # name and peer address (components/k8s/etcd/member.py).
    for node_name, node in control_plane.nodes.items():
        ControlPlaneMember(
            f"member-{node_name}",
            k8s_wiring.control_plane_member_args(env, node_name, node.vm_id, bootstrap, cluster),
            opts=pulumi.ResourceOptions(depends_on=api_up),
        )
else:
    api_up = []
    cluster = ClusterAccess("cluster", k8s_wiring.existing_cluster_args(env))

# Scale in and VM replacement: a GPU worker's node is drained and removed before its VM goes
# (Pulumi deletes these guards before the VMs they depend on; docs/environments.md, day two).
for node_name, node in gpu_workers.nodes.items():
    NodeDrain(
        f"drain-{node_name}",
        k8s_wiring.node_drain_args(env, node_name, node.vm_id, cluster),
        opts=pulumi.ResourceOptions(depends_on=api_up),
    )

# Add-ons are independent of each other; the jobs need the MPIJob CRD from the operator.
GpuDevicePlugin("gpu", k8s_wiring.gpu_support_args(env, cluster))
RdmaDevicePlugin("rdma-pods", k8s_wiring.rdma_support_args(env, cluster))
monitoring_args = k8s_wiring.monitoring_args(env, cluster)
if monitoring_args is not None:
    GpuMonitoring("monitoring", monitoring_args)
mpi_operator = MpiOperator("mpi-operator", k8s_wiring.mpi_operator_args(env, cluster))
training_args = k8s_wiring.training_jobs_args(env, cluster, mpi_operator)
if training_args is not None:
    TrainingJobs("training", training_args)
# Optional: Kubeflow Trainer v2 and Katib, and a sample Experiment whose trials are TrainJobs.
tuning_args = k8s_wiring.kubeflow_tuning_args(env, cluster)
if tuning_args is not None:
    tuning = KubeflowTuning("kubeflow-tuning", tuning_args)
    sample_args = k8s_wiring.tuning_sample_args(env, cluster, tuning)
    if sample_args is not None:
        TuningSample("tuning", sample_args)

pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("rdmaSwitchId", fabric.switch_id)
pulumi.export("rdmaPortGroup", fabric.port_group_name)
pulumi.export("pvrdmaVmknics", fabric.vmknic_devices)
pulumi.export("nodes", vsphere_wiring.node_exports(control_plane, gpu_workers))
