"""The nodes a stack creates, as the scheduler will see them once they have joined.

Labels and taints come from the same functions that write the kubeadm configuration the nodes
register with (`components.k8s.node_bootstrap.spec.node_labels`/`node_taints`), plus what kubeadm and the
kubelet add on their own:

- the kubelet labels every node `kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch`;
- kubeadm's `mark-control-plane` phase labels control-plane nodes
  `node-role.kubernetes.io/control-plane` and `node.kubernetes.io/exclude-from-external-load-balancers`
  (both value ""; kubeadm `constants.LabelNodeRoleControlPlane`, `LabelExcludeFromExternalLB`),
  and taints them with `nodeRegistration.taints`, which our config writes explicitly.

Allocatable is what the kubelet reports with kubeadm's KubeletConfiguration (no system or kube
reservations, eviction threshold `memory.available<100Mi`, 110 pods): the VM's vCPUs, and its
memory less what the guest kernel keeps (assumed 5 %: firmware, kernel, crash kernel) and the
eviction threshold. Extended resources (`nvidia.com/gpu`, `rdma/...`) are not here: a node has
them only where the device plugin that advertises them runs, which the admission check decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from components.k8s.gpu_runtime import NVIDIA_RUNTIME_HANDLER
from components.k8s.node_bootstrap.spec import node_labels, node_taints
from components.k8s.objects import CONTROL_PLANE_LABEL
from stacks.environment.model import Environment
from stacks.tools.plan.admission.rules import NodeModel, Taint
from stacks.wiring.kubernetes import bootstrap_args

MAX_PODS = 110
"""The kubelet's default `maxPods` (our KubeletConfiguration does not change it)."""
EVICTION_MEMORY_MI = 100
"""The kubelet's default hard eviction threshold `memory.available<100Mi`."""
GUEST_MEMORY_SHARE = Fraction(95, 100)
"""Share of the VM's memory the guest kernel reports as MemTotal (assumed)."""
KUBEADM_CONTROL_PLANE_LABELS = {CONTROL_PLANE_LABEL: "", "node.kubernetes.io/exclude-from-external-load-balancers": ""}


@dataclass(frozen=True)
class PlannedNode:
    """A node and the devices its VM has (advertised only where their device plugin runs)."""

    node: NodeModel
    gpus: int
    """vGPUs attached to the VM (one `nvidia.com/gpu` each once the device plugin runs)."""
    pvrdma: bool
    """Whether the VM has a PVRDMA NIC (an RDMA device for the RDMA plugin to advertise)."""


@dataclass(frozen=True)
class ClusterModel:
    nodes: tuple[PlannedNode, ...]
    assumptions: tuple[str, ...]
    """What was assumed rather than known (empty when this stack bootstraps the nodes)."""


def _allocatable(vcpus: int, memory_mb: int) -> dict[str, Fraction]:
    memory = Fraction(memory_mb * 2**20) * GUEST_MEMORY_SHARE - EVICTION_MEMORY_MI * 2**20
    return {"cpu": Fraction(vcpus), "memory": memory, "pods": Fraction(MAX_PODS)}


def cluster_model(env: Environment) -> ClusterModel:
    """The stack's nodes; with `kubernetes.mode: existing` the same shape, said to be assumed."""
    spec = bootstrap_args(env)
    planned: list[PlannedNode] = []
    for role, nodes, pool in (
        ("control-plane", spec.control_plane_nodes, env.control_plane),
        ("gpu-worker", spec.worker_nodes, env.gpu_workers),
    ):
        control_plane = role == "control-plane"
        for node in nodes:
            labels = {
                "kubernetes.io/hostname": node.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(KUBEADM_CONTROL_PLANE_LABELS if control_plane else {}),
                **node_labels(spec, node),
            }
            taints = tuple(
                Taint(key=t.key, effect=t.effect, value=t.value or "")
                for t in node_taints(spec, node, control_plane=control_plane)
            )
            # The bootstrap registers containerd's `nvidia` handler on GPU workers (the GPU
            # Operator's toolkit does the same in gpu-operator mode).
            handlers = frozenset({"runc", NVIDIA_RUNTIME_HANDLER} if node.gpu else {"runc"})
            model = NodeModel(
                name=node.name,
                role=role,
                labels=labels,
                taints=taints,
                allocatable=_allocatable(pool.vcpus, pool.memory_mb),
                runtime_handlers=handlers,
            )
            gpus = len(env.gpu_workers.vgpu_profiles) if node.gpu else 0
            planned.append(PlannedNode(node=model, gpus=gpus, pvrdma=node.rdma_ip is not None))
    assumptions: tuple[str, ...] = ()
    if env.kubernetes.mode == "existing":
        taint = "tainted nvidia.com/gpu=present:NoSchedule" if env.kubernetes.gpu_node_taint else "untainted"
        assumptions = (
            "kubernetes.mode is 'existing': the cluster's nodes are unknown offline; assumed they are "
            f"this stack's VMs joined the kubeadm way: {len(spec.control_plane_nodes)} control-plane node(s) "
            "labelled and tainted node-role.kubernetes.io/control-plane, "
            f"{len(spec.worker_nodes)} GPU worker(s) labelled nvidia.com/gpu.present=true, {taint}, "
            "with containerd's 'nvidia' handler",
        )
    return ClusterModel(nodes=tuple(planned), assumptions=assumptions)
