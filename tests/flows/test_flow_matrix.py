"""Issue 41: every connection of docs/flows.yaml, for every stack shape and day-two moment.

For each shape (RoCE or TCP jobs; one or three control-plane nodes; with and without a load
balancer in front of the API and admin networks) and each moment (steady; a control-plane node
added; one replaced with a new address; workers added), the cluster is built in network namespaces
(tests/flows/network_lab.py): every node holds the nftables ruleset of *its own* first boot, read
from the user-data the stack renders for it (old nodes from the stack as it was, new ones from the
stack as it is), and every flow is a real connection through them. Flows to or from pods are also
judged by the stack's NetworkPolicies with upstream semantics (tests/flows/netpol.py). A needed
flow must pass both; a refused one must be refused by one of them.

The day-two moments that change the control plane run real etcd members in the control-plane
namespaces, joined as kubeadm joins them (the new node adds itself as a learner through an old
member's client port, its etcd starts, the learner is promoted), with the membership sync that the
control-plane nodes' user-data installs run on the old members at each change, as its timer would.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.k8s.addons.dcgm_exporter import EXPORTER_LABELS, DcgmExporterSettings
from components.k8s.addons.monitoring import GpuMonitoringArgs, render_monitoring_network_policies
from components.k8s.addons.mpi_operator import MpiOperatorSettings, render_mpi_operator
from components.k8s.addons.prometheus import PROMETHEUS_LABELS, PrometheusSettings
from components.k8s.jobs import FabricCheckJob, TrainingJobsArgs
from components.k8s.jobs.pods import WorkerShape
from components.k8s.jobs.training_jobs import render_training_guard
from components.k8s.node_bootstrap import ClusterNode, ClusterSpec, UserDataRenderer
from components.k8s.node_bootstrap.paths import FIREWALL_RULES_PATH, FIREWALL_SYNC_SCRIPT_PATH
from components.k8s.node_bootstrap.spec import NodeFirewall
from tests.components.k8s.node_bootstrap.cluster_settings import (
    CONTROL_PLANE_JOIN,
    HANDOFF_SIGNER_PEM,
    cluster_settings,
)
from tests.flows.netpol import Endpoint, allows
from tests.flows.network_lab import Lab, Probe, write
from tests.real_parts import require_program, unavailable

ROOT = Path(__file__).resolve().parents[2]
MATRIX = yaml.safe_load((ROOT / "docs" / "flows.yaml").read_text())

MANAGEMENT, RDMA, POD_POOL = "10.10.0.0/24", "192.168.0.0/24", "10.244.0.0/16"
ADMIN_NETWORK, LOAD_BALANCER_NETWORK = "172.20.0.0/16", "172.30.0.0/28"
JOBS_NAMESPACE, TENANT_NAMESPACE, TRAINER_NAMESPACE = "training", "tenant-a", "kubeflow-system"

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
    renderer = UserDataRenderer(spec, token="abcdef.0123456789abcdef", ca_cert_hash="sha256:" + "0" * 64,
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
        new = spec_for(shape, control_plane, [*workers, ClusterNode(name=name, management_ip=management, rdma_ip=rdma, gpu=True)])
        booted = {n.name: (new if n.name == name else old) for n in new.all_nodes}
        roles["added-worker"] = name
        return Moment(old, new, booted, roles)
    return Moment(old, old, {n.name: old for n in old.all_nodes}, roles)


# --- the cluster in namespaces -----------------------------------------------------------------
@dataclass
class Cluster:
    lab: Lab
    moment: Moment
    namespaces: dict[str, str]
    """Node name or machine/pod role -> namespace."""
    endpoints: dict[str, Endpoint]
    """Flow role -> who it is to NetworkPolicy (and its address)."""
    sync_scripts: dict[str, Path]
    """Control-plane node -> the membership sync its user-data installs (absent: none)."""


def build(lab: Lab, shape: Shape, tmp: Path) -> Cluster:
    moment = moment_for(shape)
    nodes = {n.name: n for n in moment.new.all_nodes}
    # A removed node is there (as `<name>-old`) until its member is removed, then goes.
    keys = sorted([*nodes, *(f"{name}-old" for name in moment.removed)])
    block_of = {key: f"10.244.{i}" for i, key in enumerate(keys, start=1)}
    namespaces: dict[str, str] = {}
    sync_scripts: dict[str, Path] = {}
    for name in moment.booted:
        namespaces[name] = lab.node(name, f"{node_address(moment, name)}/24", rdma_of(nodes[name]), POD_POOL)
    for name in moment.removed:
        old_node = next(n for n in moment.old.all_nodes if n.name == name)
        namespaces[f"{name}-old"] = lab.node(f"{name}-old", f"{old_node.management_ip}/24", None, POD_POOL)
    for key, namespace in namespaces.items():
        name = key.removesuffix("-old")
        spec = moment.old if key.endswith("-old") else moment.booted[name]
        files = first_boot_files(spec, name)
        lab.load(namespace, files[FIREWALL_RULES_PATH])
        if FIREWALL_SYNC_SCRIPT_PATH in files and not key.endswith("-old"):
            sync_scripts[name] = write(tmp / f"sync-{name}.sh", files[FIREWALL_SYNC_SCRIPT_PATH], 0o755)
    # Calico's routes: every other node's pod block via its management address.
    present = {key: node_address(moment, key.removesuffix("-old"), old=key.endswith("-old")) for key in namespaces}
    for key, namespace in namespaces.items():
        for other, address in present.items():
            if other != key:
                lab.ip(namespace, "route", "add", f"{block_of[other]}.0/24", "via", address)
    endpoints: dict[str, Endpoint] = {}
    for role, name in moment.roles.items():
        address = nodes[name].rdma_ip if role.endswith("-rdma") else node_address(moment, name)
        assert address is not None
        endpoints[role] = Endpoint(address=address, node=name)
        namespaces.setdefault(role, namespaces[name])
    for role, (segment, address) in OUTSIDE.items():
        kind = {"management": {"management": [address]}, "rdma": {"rdma": [address]}}[segment]
        namespaces[role] = lab.machine(role, **kind)
        endpoints[role] = Endpoint(address=address.split("/")[0], node=role)
    for role, (node, octet, namespace_name, labels) in POD_ROLES.items():
        address = f"{block_of[node]}.{octet}"
        namespaces[role] = lab.pod(role, namespaces[node], address)
        endpoints[role] = Endpoint(address=address, node=node, namespace=namespace_name, labels=labels)
    lab.flush()
    return Cluster(lab, moment, namespaces, endpoints, sync_scripts)


def node_address(moment: Moment, name: str, *, old: bool = False) -> str:
    spec = moment.old if old else moment.new
    return next(n.management_ip for n in spec.all_nodes if n.name == name)


def rdma_of(node: ClusterNode) -> str | None:
    return f"{node.rdma_ip}/24" if node.rdma_ip else None


# --- etcd, joined as kubeadm joins a control-plane node ------------------------------------------
ETCD_TIMING = ["--heartbeat-interval", "50", "--election-timeout", "500", "--strict-reconfig-check=false"]
"""Short elections, and no wait for a new peer's 5 s of health before the next membership change
(`HealthInterval`): kubeadm retries those refusals for minutes; the test would only wait. Neither
touches what is checked: that members reach each other's peer port to catch up and stay healthy."""


class Etcd:
    """Real etcd members in the control-plane namespaces (plain HTTP: the firewall sees ports and
    addresses, not TLS; the sync's client certificates are curl options it ignores for http)."""

    def __init__(self, cluster: Cluster, etcd: str, etcdctl: str, tmp: Path) -> None:
        self.cluster, self.etcd, self.etcdctl, self.tmp = cluster, etcd, etcdctl, tmp
        self.members: dict[str, subprocess.Popen[str]] = {}

    def start(self, key: str, address: str, initial_cluster: str, state: str) -> None:
        name = key.removesuffix("-old")
        self.members[key] = self.cluster.lab.start(
            self.cluster.namespaces[key],
            [
                self.etcd, "--name", name, "--data-dir", str(self.tmp / f"etcd-{key}"),
                "--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", f"http://{address}:2379",
                "--listen-peer-urls", "http://0.0.0.0:2380", "--initial-advertise-peer-urls", f"http://{address}:2380",
                "--initial-cluster", initial_cluster, "--initial-cluster-state", state,
                "--logger", "zap", "--log-outputs", "stderr", "--log-level", "error", *ETCD_TIMING,
            ],
        )  # fmt: skip

    def ctl(self, key: str, *args: str, endpoint: str = "http://127.0.0.1:2379") -> str:
        return self.cluster.lab.exec(
            self.cluster.namespaces[key],
            self.etcdctl, "--endpoints", endpoint, "--dial-timeout", "2s", "--command-timeout", "4s", *args,
            env={"ETCDCTL_API": "3"},
        )  # fmt: skip

    def retried(self, key: str, *args: str, endpoint: str, deadline_s: float = 15.0) -> str:
        """A membership change, retried as kubeadm retries it (`etcdutil` backoff) while the
        cluster elects a leader or settles after the last change."""
        until = time.monotonic() + deadline_s
        while True:
            try:
                return self.ctl(key, *args, endpoint=endpoint)
            except RuntimeError:
                if time.monotonic() > until:
                    raise
                time.sleep(0.2)

    def wait_healthy(self, key: str, deadline_s: float = 20.0) -> None:
        until = time.monotonic() + deadline_s
        while True:
            try:
                self.ctl(key, "endpoint", "health")
                return
            except RuntimeError:
                if time.monotonic() > until:
                    raise AssertionError(f"etcd on {key} never became healthy") from None
                time.sleep(0.1)

    def sync(self, nft: str) -> None:
        """One tick of each running member's membership sync (what its timer does every 5 s)."""
        for key in self.members:
            script = self.cluster.sync_scripts.get(key)
            if script is not None:
                self.cluster.lab.exec(
                    self.cluster.namespaces[key],
                    str(script),
                    env={"GPUCLUSTER_ETCD_ENDPOINT": "http://127.0.0.1:2379", "GPUCLUSTER_NFT": nft},
                )

    def member_id(self, key: str, name: str) -> str:
        members = json.loads(self.ctl(key, "member", "list", "-w", "json"))["members"]
        return next(format(m["ID"], "x") for m in members if m.get("name") == name)

    def join(self, joining: str, through: str, address: str, nft: str) -> None:
        """kubeadm's join of a control-plane node: add it as a learner through an existing
        member's client port (from the joining node), start it, promote it once caught up."""
        seed = node_address(self.cluster.moment, "cp-1")
        added = self.retried(
            joining, "member", "add", joining, "--peer-urls", f"http://{address}:2380", "--learner",
            endpoint=f"http://{seed}:2379",
        )  # fmt: skip
        initial = next(line.split("=", 1)[1].strip('"') for line in added.splitlines() if "ETCD_INITIAL_CLUSTER=" in line)
        self.sync(nft)
        self.start(joining, address, initial, "existing")
        until = time.monotonic() + 15.0
        while True:
            try:
                member = self.member_id(through, joining)
                self.ctl(through, "member", "promote", member)
                return
            except (RuntimeError, StopIteration) as error:
                if time.monotonic() > until:
                    raise AssertionError(
                        f"etcd on {joining} ({address}) never caught up to be promoted: the old members' "
                        f"peer port does not let it in ({error})"
                    ) from None
                time.sleep(0.2)


def run_membership(cluster: Cluster, shape: Shape, nft: str, tmp: Path) -> None:
    etcd_bin, etcdctl = require_program("etcd", "/usr/bin/etcd", "etcd-server"), require_program(
        "etcdctl", "/usr/bin/etcdctl", "etcd-client"
    )
    etcd = Etcd(cluster, etcd_bin, etcdctl, tmp)
    moment = cluster.moment
    first = [n.name for n in moment.old.control_plane_nodes]
    keys = [f"{n}-old" if n in moment.removed else n for n in first]
    addresses = {key: node_address(moment, key.removesuffix("-old"), old=True) for key in keys}
    initial = ",".join(f"{key.removesuffix('-old')}=http://{address}:2380" for key, address in addresses.items())
    for key in keys:
        etcd.start(key, addresses[key], initial, "new")
    for key in keys:
        etcd.wait_healthy(key)
    etcd.sync(nft)
    for name in moment.removed:  # the stack removes the departing member, from the management network
        key = f"{name}-old"
        member = etcd.member_id("cp-1", name)
        seed = node_address(moment, "cp-1")
        etcd.retried("management-host", "member", "remove", member, endpoint=f"http://{seed}:2379")
        etcd.members.pop(key).kill()
        cluster.lab.ip(cluster.namespaces[key], "link", "set", "eth0", "down")
        etcd.sync(nft)
    for name in moment.joined:
        etcd.join(name, "cp-1", node_address(moment, name), nft)
        etcd.sync(nft)
    health = etcd.ctl("cp-1", "endpoint", "health", "--cluster")
    assert health.count("is healthy") == len(moment.new.control_plane_nodes), health


# --- running the matrix ------------------------------------------------------------------------
def flows_for(shape: Shape, roles: Mapping[str, Endpoint]) -> list[dict[str, Any]]:
    return [f for f in MATRIX["flows"] if shape.matches(f.get("when", {})) and f["from"] in roles and f["to"] in roles]


@pytest.fixture(scope="module")
def nft() -> str:
    if os.geteuid() != 0:
        unavailable("network namespaces", "the flow matrix needs root (ip netns)")
    require_program("ip", "/usr/sbin/ip", "iproute2")
    require_program("curl", "/usr/bin/curl", "curl")  # the membership sync reads etcd with it
    return require_program("nft", "/usr/sbin/nft", "nftables")


@pytest.fixture
def lab(nft: str, tmp_path: Path) -> Iterator[Lab]:
    made = Lab(nft, tmp_path)
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("shape", STEADY + DAY_TWO, ids=lambda s: s.id)
def test_the_cluster_allows_what_it_needs_and_refuses_the_rest(lab: Lab, nft: str, shape: Shape, tmp_path: Path) -> None:
    cluster = build(lab, shape, tmp_path)
    etcd_nodes: set[str] = set()
    if cluster.moment.joined:
        run_membership(cluster, shape, nft, tmp_path)
        etcd_nodes = {n.name for n in cluster.moment.new.control_plane_nodes}
    flows = flows_for(shape, cluster.endpoints)
    listening: dict[str, tuple[set[int], set[int]]] = {}
    for flow in flows:
        namespace = cluster.namespaces[flow["to"]]
        node = cluster.endpoints[flow["to"]].node
        if node in etcd_nodes and not cluster.endpoints[flow["to"]].is_pod and flow["port"] in (2379, 2380):
            continue  # etcd itself answers there
        listening.setdefault(namespace, (set(), set()))[flow["protocol"] == "udp"].add(flow["port"])
    lab.listen(listening)
    probes = [
        Probe(
            namespace=cluster.namespaces[f["from"]],
            source=cluster.endpoints[f["from"]].address,
            target=cluster.endpoints[f["to"]].address,
            port=f["port"],
            protocol=f["protocol"],
        )
        for f in flows
    ]
    connected = lab.probe(probes)
    policies = network_policies(shape, cluster.moment.new)
    wrong = []
    for flow, data_path in zip(flows, connected, strict=True):
        source, destination = cluster.endpoints[flow["from"]], cluster.endpoints[flow["to"]]
        policy = allows(policies, source, destination, flow["port"], flow["protocol"])
        if (data_path and policy) != (flow["expect"] == "allow"):
            verdict = f"node firewalls {'pass' if data_path else 'drop'}, NetworkPolicies {'allow' if policy else 'refuse'}"
            wrong.append(
                f"{flow['id']} ({flow['from']} {source.address} -> {flow['to']} {destination.address}:"
                f"{flow['port']}/{flow['protocol']}) should {flow['expect']}: {verdict}"
            )
    assert not wrong, f"{shape.id}:\n" + "\n".join(wrong)


def test_every_shape_and_moment_of_the_issue_is_covered() -> None:
    shapes = STEADY + DAY_TWO
    assert {s.transport for s in shapes} == {"roce", "tcp"}
    assert {s.control_planes for s in STEADY} == {1, 3}
    assert {(s.load_balancer, s.admin_networks) for s in STEADY} == {(False, False), (True, True), (False, True), (True, False)}
    assert {s.moment for s in DAY_TWO} == {"control-plane-added", "control-plane-replaced", "workers-added"}
    every = {f["id"] for s in shapes for f in MATRIX["flows"] if s.matches(f.get("when", {}))}
    assert every == {f["id"] for f in MATRIX["flows"]}, "a flow no shape runs"


def test_the_matrix_is_well_formed() -> None:
    roles = set(MATRIX["roles"])
    for flow in MATRIX["flows"]:
        assert {"id", "from", "to", "port", "protocol", "expect", "why", "upstream"} <= set(flow), flow
        assert flow["from"] in roles and flow["to"] in roles, flow["id"]
        assert flow["protocol"] in ("tcp", "udp") and flow["expect"] in ("allow", "refuse"), flow["id"]
    assert roles <= set(OUTSIDE) | set(POD_ROLES) | {
        "control-plane", "other-control-plane", "joined-control-plane", "worker", "other-worker",
        "worker-rdma", "other-worker-rdma", "added-worker",
    }  # fmt: skip


def test_a_shape_id_says_what_it_is() -> None:
    assert replace(STEADY[0], moment="workers-added").id == "roce-1cp-workers-added"
