"""The flow matrix's stack shapes (tests/flows/test_flow_matrix.py): the addresses of the lab's
cluster, each shape and day-two moment, the specs each node boots from, the stack's
NetworkPolicies. Shared with the lab's other tests (test_outside.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.k8s.addons.dcgm_exporter import EXPORTER_LABELS, DcgmExporterSettings
from components.k8s.addons.kubeflow_tuning import KATIB_NAMESPACE, TRAINER_NAMESPACE
from components.k8s.addons.monitoring import GpuMonitoringArgs, render_monitoring_network_policies
from components.k8s.addons.mpi_operator import MpiOperatorSettings, render_mpi_operator
from components.k8s.addons.prometheus import PROMETHEUS_LABELS, PrometheusSettings
from components.k8s.jobs import FabricCheckJob, TrainingJobsArgs
from components.k8s.jobs.pods import WorkerShape
from components.k8s.jobs.training_jobs import render_training_guard
from components.k8s.node_bootstrap import ClusterNode, ClusterSpec, UserDataRenderer
from components.k8s.node_bootstrap.spec import NodeFirewall
from tests.components.k8s.node_bootstrap.cluster_settings import (
    CONTROL_PLANE_JOIN,
    HANDOFF_SIGNER_PEM,
    cluster_settings,
)

ROOT = Path(__file__).resolve().parents[2]
MATRIX = yaml.safe_load((ROOT / "docs" / "flows.yaml").read_text())

MANAGEMENT, RDMA, POD_POOL = "10.10.0.0/24", "192.168.0.0/24", "10.244.0.0/16"
ADMIN_NETWORK, LOAD_BALANCER_NETWORK = "172.20.0.0/16", "172.30.0.0/28"
JOBS_NAMESPACE, TENANT_NAMESPACE = "training", "tenant-a"

CONTROL_PLANE = {"cp-1": "10.10.0.11", "cp-2": "10.10.0.12", "cp-3": "10.10.0.13"}
REPLACED_ADDRESS = "10.10.0.23"
"""cp-3's replacement takes a new address (docs/environments.md, changing a node's address)."""
WORKERS = {"gpu-1": ("10.10.0.51", "192.168.0.51"), "gpu-2": ("10.10.0.52", "192.168.0.52")}
ADDED_WORKER = ("gpu-3", "10.10.0.53", "192.168.0.53")
OUTSIDE = {  # role -> (segment, address/prefix)
    "management-host": ("management", "10.10.0.200/24"),
    "admin-host": ("management", "172.20.0.10/16"),
    "load-balancer": ("management", "172.30.0.5/28"),
    "load-balancer-health": ("management", "172.30.0.6/28"),
    "outside-host": ("management", "198.51.100.10/24"),
    "esxi-vmknic": ("rdma", "192.168.0.250/24"),
}
POD_ROLES = {  # role -> (node, last octet in the node's block, namespace, labels)
    "launcher-pod": ("gpu-1", 10, JOBS_NAMESPACE, {"training.kubeflow.org/job-role": "launcher"}),
    "tenant-pod": ("gpu-1", 11, TENANT_NAMESPACE, {"app": "anything"}),
    "exporter-pod": ("gpu-1", 12, DcgmExporterSettings().namespace, dict(EXPORTER_LABELS)),
    "other-job-worker-pod": ("gpu-1", 13, JOBS_NAMESPACE, {"training.kubeflow.org/job-role": "worker"}),
    "job-worker-pod": ("gpu-2", 10, JOBS_NAMESPACE, {"training.kubeflow.org/job-role": "worker"}),
    "prometheus-pod": ("gpu-2", 11, PrometheusSettings().namespace, dict(PROMETHEUS_LABELS)),
    "webhook-pod": ("gpu-2", 12, TRAINER_NAMESPACE, {"app.kubernetes.io/name": "trainer"}),
    # JobSet's controller, in Trainer's namespace (its webhook Service selects this label).
    "jobset-webhook-pod": ("gpu-2", 13, TRAINER_NAMESPACE, {"control-plane": "controller-manager"}),
    "katib-webhook-pod": ("gpu-1", 14, KATIB_NAMESPACE, {"katib.kubeflow.org/component": "controller"}),
    # CoreDNS on a control-plane node, where kubeadm's Deployment tolerates the taint.
    "coredns-pod": ("cp-1", 10, "kube-system", {"k8s-app": "kube-dns"}),
    "metrics-server-pod": ("gpu-2", 14, "kube-system", {"k8s-app": "metrics-server"}),
}


@dataclass(frozen=True)
class Shape:
    transport: str
    control_planes: int
    load_balancer: bool
    admin_networks: bool
    moment: str = "steady"

    @property
    def id(self) -> str:
        parts = [self.transport, f"{self.control_planes}cp"]
        parts += ["lb"] if self.load_balancer else []
        parts += ["admin"] if self.admin_networks else []
        return "-".join([*parts, self.moment])

    def matches(self, when: Mapping[str, Any]) -> bool:
        facts = {
            "transport": self.transport,
            "controlPlanes": self.control_planes,
            "loadBalancer": self.load_balancer,
            "adminNetworks": self.admin_networks,
            "moment": self.moment,
        }
        for key, wanted in when.items():
            allowed = wanted if isinstance(wanted, list) else [wanted]
            if facts[key] not in allowed:
                return False
        return True


STEADY = [
    Shape(transport, control_planes, lb_and_admin, lb_and_admin)
    for transport in ("roce", "tcp")
    for control_planes in (1, 3)
    for lb_and_admin in (False, True)
] + [Shape("roce", 1, False, True), Shape("tcp", 3, True, False)]
DAY_TWO = [
    Shape("roce", 3, True, True, "control-plane-added"),  # 1 -> 3
    Shape("tcp", 3, False, True, "control-plane-replaced"),
    Shape("tcp", 3, True, True, "workers-added"),
    Shape("roce", 1, False, False, "workers-added"),
]


# --- the stack's side: specs, each node's first-boot ruleset, the NetworkPolicies --------------
def spec_for(shape: Shape, control_plane: Mapping[str, str], workers: Sequence[ClusterNode]) -> ClusterSpec:
    firewall = NodeFirewall(
        node_networks=[MANAGEMENT, RDMA],
        admin_networks=[ADMIN_NETWORK] if shape.admin_networks else [],
        load_balancer_sources=[LOAD_BALANCER_NETWORK] if shape.load_balancer else [],
        rdma_networks=[RDMA],
    )
    nodes = [ClusterNode(name=name, management_ip=address) for name, address in control_plane.items()]
    endpoint = "k8s-api.example.test" if shape.load_balancer else nodes[0].management_ip
    return ClusterSpec(
        **cluster_settings(
            pod_cidr=POD_POOL,
            control_plane_endpoint=endpoint,
            control_plane_nodes=nodes,
            worker_nodes=list(workers),
            node_firewall=firewall,
        )
    )


def first_boot_files(spec: ClusterSpec, node: str) -> dict[str, str]:
    renderer = UserDataRenderer(
        spec,
        token="abcdef.0123456789abcdef",
        ca_cert_hash="sha256:" + "0" * 64,
        control_plane_join=CONTROL_PLANE_JOIN, pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    )
    document = yaml.load(renderer.render(node), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return {f["path"]: f["content"] for f in document["write_files"]}


def network_policies(shape: Shape, spec: ClusterSpec) -> list[dict[str, Any]]:
    jobs = TrainingJobsArgs(
        provider=None,  # type: ignore[arg-type]
        fabric_check=FabricCheckJob(workers=2, shape=WorkerShape(transport=shape.transport)),  # type: ignore[arg-type]
        node_networks=[MANAGEMENT, RDMA],
    )
    monitoring = GpuMonitoringArgs(
        provider=None,  # type: ignore[arg-type]
        exporter=DcgmExporterSettings(),
        prometheus=PrometheusSettings(),
        api_server_addresses=[node.management_ip for node in spec.control_plane_nodes],
    )
    return [
        *render_training_guard(jobs),
        *render_monitoring_network_policies(monitoring),
        *render_mpi_operator(MpiOperatorSettings()),
    ]


# --- the moment: which nodes exist, and which spec each one booted from --------------------------
@dataclass
class Moment:
    old: ClusterSpec
    new: ClusterSpec
    booted: dict[str, ClusterSpec]
    """Every node present now -> the spec of its first boot."""
    roles: dict[str, str]
    """Node roles of docs/flows.yaml -> node name."""
    removed: list[str] = field(default_factory=list)
    """Nodes of `old` gone by now (their etcd member removed first)."""
    joined: list[str] = field(default_factory=list)
    """Control-plane nodes that join now, in order."""


def moment_for(shape: Shape) -> Moment:
    workers = [ClusterNode(name=n, management_ip=m, rdma_ip=r, gpu=True) for n, (m, r) in WORKERS.items()]
    three = dict(CONTROL_PLANE)
    one = {"cp-1": CONTROL_PLANE["cp-1"]}
    roles = {"control-plane": "cp-1", "worker": "gpu-1", "other-worker": "gpu-2"}
    roles |= {"worker-rdma": "gpu-1", "other-worker-rdma": "gpu-2"}
    if shape.moment == "control-plane-added":
        old, new = spec_for(shape, one, workers), spec_for(shape, three, workers)
        booted = {n.name: (new if n.name in ("cp-2", "cp-3") else old) for n in new.all_nodes}
        roles |= {"joined-control-plane": "cp-2", "other-control-plane": "cp-3"}
        return Moment(old, new, booted, roles, joined=["cp-2", "cp-3"])
    if shape.moment == "control-plane-replaced":
        old = spec_for(shape, three, workers)
        new = spec_for(shape, {**three, "cp-3": REPLACED_ADDRESS}, workers)
        booted = {n.name: (new if n.name == "cp-3" else old) for n in new.all_nodes}
        roles |= {"joined-control-plane": "cp-3", "other-control-plane": "cp-2"}
        return Moment(old, new, booted, roles, removed=["cp-3"], joined=["cp-3"])
    control_plane = three if shape.control_planes == 3 else one
    if shape.control_planes == 3:
        roles["other-control-plane"] = "cp-2"
    old = spec_for(shape, control_plane, workers)
    if shape.moment == "workers-added":
        name, management, rdma = ADDED_WORKER
        new = spec_for(
            shape, control_plane, [*workers, ClusterNode(name=name, management_ip=management, rdma_ip=rdma, gpu=True)]
        )
        booted = {n.name: (new if n.name == name else old) for n in new.all_nodes}
        roles["added-worker"] = name
        return Moment(old, new, booted, roles)
    return Moment(old, old, {n.name: old for n in old.all_nodes}, roles)


def node_address(moment: Moment, name: str, *, old: bool = False) -> str:
    spec = moment.old if old else moment.new
    return next(n.management_ip for n in spec.all_nodes if n.name == name)


def rdma_of(node: ClusterNode) -> str | None:
    return f"{node.rdma_ip}/24" if node.rdma_ip else None
