"""The node bootstrap refuses a containerd below what containerd's RELEASES.md recommends for the
cluster's Kubernetes minor ("Kubernetes Support"), before it configures or starts anything of
Kubernetes: the rows are `components.k8s.version_policy`'s, handed to the script in its
environment file (GPUCLUSTER_CONTAINERD_FLOORS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.k8s.node_bootstrap.env_file import bootstrap_env
from tests.components.k8s.node_bootstrap.test_bootstrap_script_runs import make_node, make_spec


def test_the_environment_file_carries_the_minors_row() -> None:
    spec = make_spec(kubernetes_version="1.36.1")
    node = spec.control_plane_nodes[0]
    assert bootstrap_env(spec, "init", node)["GPUCLUSTER_CONTAINERD_FLOORS"] == "2.3.0,2.2.0"
    older = make_spec(kubernetes_version="1.34.2")
    assert bootstrap_env(older, "init", node)["GPUCLUSTER_CONTAINERD_FLOORS"] == "2.1.3,2.0.6,1.7.28,1.6.39"


@pytest.mark.parametrize(
    ("kubernetes", "containerd"),
    [("1.36.1", "2.1.9"), ("1.36.1", "1.7.30"), ("1.35.0", "2.1.4"), ("1.35.0", "2.0.7"), ("1.34.2", "1.7.27")],
)
def test_a_containerd_below_the_minors_floor_stops_the_bootstrap(tmp_path: Path, kubernetes: str, containerd: str) -> None:
    node = make_node(tmp_path, "gpu-1", spec=make_spec(kubernetes_version=kubernetes))
    node.set("containerd-version", containerd)
    run = node.start()
    assert run.returncode == 1, run.output
    assert f"containerd {containerd} is not one containerd recommends for this cluster's Kubernetes minor" in run.output
    assert "templates/rocky9/ks.cfg's containerd.io pin" in run.output
    assert not node.calls_of("containerd --config")
    assert not node.calls_of("systemctl enable --now containerd")
    assert not node.calls_of("kubeadm")


@pytest.mark.parametrize(
    ("kubernetes", "containerd"),
    [("1.36.1", "2.3.0"), ("1.36.1", "2.2.0"), ("1.36.1", "2.4.1"), ("1.35.0", "1.7.28"), ("1.34.2", "2.0.6")],
)
def test_a_containerd_at_or_above_the_floor_is_accepted(tmp_path: Path, kubernetes: str, containerd: str) -> None:
    node = make_node(tmp_path, "gpu-1", spec=make_spec(kubernetes_version=kubernetes))
    node.set("containerd-version", containerd)
    run = node.boot()
    assert run.returncode == 0, run.output
    assert node.calls_of("containerd --version")


def test_an_unreadable_version_is_refused_with_what_containerd_printed(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2")
    node.set("containerd-version", "unknown")
    run = node.start()
    assert run.returncode == 1
    assert "cannot read containerd's version from 'containerd --version': containerd containerd.io unknown" in run.output
