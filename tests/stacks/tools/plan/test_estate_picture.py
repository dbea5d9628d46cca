"""`plan --graph`: the picture shows the estate a newcomer asks about (issue 45): every ESXi host
with the GPU worker VM pinned to it and its vGPU profile and addresses, the switch with each host's
uplink, the port group, the control plane, the Kubernetes cluster on top, and the critical path
with its minutes; none of the component graph's type tokens."""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import pytest

from stacks.environment.loader import load_environment
from stacks.tools.plan.command import plan_stack
from tests.stack_fixtures import fixture_view

OPAQUE = (
    "gpucluster\\ngpucluster",
    "gpucluster gpucluster",
    "ClusterAccess",
    "cluster-version",
    "ClusterUpgrade",
    "NodePool",
)


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, float]:
    out = tmp_path_factory.mktemp("prod")
    result = plan_stack(fixture_view("prod"), stack="prod", out_dir=out, graph_file=out / "prod.dot")
    return (out / "prod.dot").read_text(), result.timing.pulumi_up.seconds


def _label_of(dot: str, node: str) -> str:
    [label] = re.findall(rf'^\s+{node} \[label="((?:[^"\\]|\\.)*)"', dot, re.MULTILINE)
    return label.replace("\\n", "\n")


def test_each_host_holds_its_gpu_worker_with_profile_and_addresses(prod: tuple[str, float]) -> None:
    dot, _ = prod
    env = load_environment(fixture_view("prod"))
    assert len(env.hosts) == 16
    for h, host in enumerate(env.hosts):
        block = dot.split(f"subgraph cluster_host{h} {{", 1)[1].split("\n    }", 1)[0]
        assert f"ESXi {host.name}\\nvmknic {host.vmknic_ip} on {host.rdma_vmnics[0]}" in block
        [worker] = [n for n in env.gpu_workers.nodes if n.host == host.name]
        label = _label_of(block, f"worker_{worker.name.replace('-', '_')}")
        assert label.splitlines()[:3] == [
            f"GPU worker {worker.name}",
            f"VM {env.vm_name(worker)}",
            "vGPU grid_a100-40c",
        ]
        assert f"mgmt {worker.management_ip}  RDMA {worker.rdma_ip}" in label
        # and the host's uplink to the switch
        assert re.search(rf"-> switch \[ltail=cluster_host{h}, label=\"{host.rdma_vmnics[0]}\"", dot)


def test_the_switch_port_group_networks_control_plane_and_cluster_are_named(prod: tuple[str, float]) -> None:
    dot, _ = prod
    switch = _label_of(dot, "switch")
    assert switch.startswith(
        "distributed switch prod-rdma-dvs (8.0.0), MTU 9000\nport group prod-pvrdma: VLAN 140, 192.168.40.0/24"
    )
    assert _label_of(dot, "management").startswith("management network prod-mgmt\n10.40.0.0/24")
    control = _label_of(dot, "control_plane")
    assert control.startswith("control plane (3 VMs, placed by DRS)\ncp-1: VM prod-gpu-cp-1, mgmt 10.40.0.11")
    cluster = _label_of(dot, "kubernetes")
    assert cluster.startswith("Kubernetes 1.36.1 (bootstrap), cluster prod-gpu-k8s")
    assert "MPIJob training/nccl-fabric-check-roce" in _label_of(dot, "objects")
    assert "subgraph cluster_kubernetes" in dot and "lhead=cluster_kubernetes" in dot


def test_the_critical_path_is_listed_with_its_minutes(prod: tuple[str, float]) -> None:
    dot, seconds = prod
    path = _label_of(dot, "critical_path").splitlines()
    minutes, rest = divmod(round(seconds), 60)
    assert (
        path[0].startswith("critical path: about ") and f"({minutes}m{rest:02d}s) until `pulumi up` returns" in path[0]
    )
    steps = [line for line in path[1:] if re.match(r"\d+\. ", line)]
    assert len(steps) >= 3
    assert all(re.search(r": \d+m\d\ds \(from \d+m\d\ds\)$", line) for line in steps), steps
    assert any("full clone" in line for line in steps)
    # The VMs on the path are drawn red in the estate as well.
    assert re.search(r"worker_worker_\d+ \[label=\"[^\"]*\", color=\"#c0392b\"", dot)


def test_no_box_is_a_type_token(prod: tuple[str, float]) -> None:
    dot, _ = prod
    for token in OPAQUE:
        assert token not in dot, token


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing (scripts/setup.sh installs it)")
def test_prods_png_fits_two_screens(tmp_path: Path) -> None:
    plan_stack(fixture_view("prod"), stack="prod", out_dir=tmp_path, graph_file=tmp_path / "prod.png")
    width, height = struct.unpack(">II", (tmp_path / "prod.png").read_bytes()[16:24])
    assert width <= 2 * 1920 and height <= 2 * 1080, (width, height)
