"""`python -m stacks verify dev` reports GPU health per node next to the jobs' verdict, from a fake
kubectl that answers `get nodes`, the exporter pods and their metrics through the pod proxy the
way the API server does (tests/components/k8s/jobs/fake_cluster_bin.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.components.k8s.jobs.fake_cluster import gpu_world, install, node, read_world
from tests.stack_fixtures import fixture_project_dir, fixture_stack
from tests.stacks.tools.verify.test_verify import launcher_pod, log, mpijob_object

ROOT = Path(__file__).resolve().parents[4]
JOB = "nccl-fabric-check-roce"


def passing_job(world: dict[str, Any]) -> dict[str, Any]:
    pod = launcher_pod(JOB, "x7k2p", "2026-03-01T10:00:00Z")
    world["mpijobs"] = {JOB: mpijob_object(JOB, "Succeeded")}
    world["pods"].append(pod)
    world["logs"] = {pod["metadata"]["name"]: {"current": log("nccl_tests_roce.log")}}
    return world


def verify(tmp_path: Path, world: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    env = install(tmp_path, passing_job(world))
    return subprocess.run(
        [sys.executable, "-m", "stacks", "verify", "dev", *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=fixture_project_dir(),
        timeout=120,
    )


def test_healthy_gpus_pass_next_to_the_fabric_verdict(tmp_path: Path) -> None:
    result = verify(tmp_path, gpu_world())
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("worker-1", "worker-2", "worker-3", "worker-4"):
        assert f"PASS GPU health {name}" in result.stdout
    assert "GPU 0 (GRID T4-16C): 61 C" in result.stdout
    assert "exporter: pod dcgm-exporter-" in result.stdout
    assert result.stdout.rstrip().endswith("verdict: PASS")
    # The metrics came through the API server's pod proxy on the exporter's port.
    calls = read_world(tmp_path)["calls"]
    assert any(c.startswith("get --raw /api/v1/namespaces/gpu-monitoring/pods/dcgm-exporter-") for c in calls)
    assert any("app.kubernetes.io/name=dcgm-exporter" in c for c in calls)


def test_an_xid_on_one_node_fails_verify(tmp_path: Path) -> None:
    result = verify(tmp_path, gpu_world(metrics={"worker-2": "dcgm_metrics_xid79_hot.txt"}))
    assert result.returncode == 1
    assert "FAIL GPU health worker-2" in result.stdout
    assert "XID 79" in result.stdout
    assert "verdict: FAIL (GPU health worker-2)" in result.stdout


def test_an_unhealthy_device_and_a_pending_exporter_fail_with_the_reason(tmp_path: Path) -> None:
    nodes = [node("worker-1"), node("worker-2", gpus="2", allocatable="1"), node("worker-3"), node("worker-4")]
    result = verify(tmp_path, gpu_world(nodes=nodes, exporter_phase={"worker-3": "Pending"}))
    assert result.returncode == 1
    assert "1 GPU(s) unhealthy: the device plugin lowered allocatable below capacity" in result.stdout
    # The API server refuses to proxy to a pod that has no IP yet.
    assert "address not allowed" in result.stdout
    assert "verdict: FAIL (GPU health worker-2, GPU health worker-3)" in result.stdout


def test_a_worker_that_never_joined_and_a_not_ready_node_fail(tmp_path: Path) -> None:
    nodes = [node("worker-1"), node("worker-2", ready="False"), node("worker-3")]
    result = verify(tmp_path, gpu_world(nodes=nodes))
    assert result.returncode == 1
    assert "worker-4" in result.stdout and "not a node of the cluster" in result.stdout
    assert "node is not Ready (KubeletNotReady)" in result.stdout


def test_the_gpu_operators_exporter_is_read_in_gpu_operator_mode(tmp_path: Path) -> None:
    view = yaml.safe_load((fixture_stack("dev")).read_text())
    env = view["config"]["vsphere-gpu-cluster:environment"]
    env["gpu"] = {
        "mode": "gpu-operator",
        "gpuOperator": {"driverRepository": "registry.example/nvidia", "driverVersion": "550.127.05"},
    }
    view["config"]["vsphere-gpu-cluster:nvidiaLicenseToken"] = {"secure": "v1:c2VjcmV0"}
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(yaml.safe_dump(view))
    world = gpu_world(exporter_namespace="gpu-operator", exporter_labels={"app": "nvidia-dcgm-exporter"})
    result = verify(tmp_path, world, "--file", str(stack))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS GPU health worker-4" in result.stdout
    assert any(c.startswith("get --raw /api/v1/namespaces/gpu-operator/pods/") for c in read_world(tmp_path)["calls"])


def test_without_monitoring_only_the_device_plugins_view_is_judged(tmp_path: Path) -> None:
    view = yaml.safe_load((fixture_stack("dev")).read_text())
    view["config"]["vsphere-gpu-cluster:environment"]["monitoring"] = {"enabled": False}
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(yaml.safe_dump(view))
    world = gpu_world()
    world["metrics"] = {}
    result = verify(tmp_path, world, "--file", str(stack))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "metrics: not read (monitoring.enabled is false)" in result.stdout
    assert not any(c.startswith("get --raw") for c in read_world(tmp_path)["calls"])
