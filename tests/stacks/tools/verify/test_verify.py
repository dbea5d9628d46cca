"""`python -m stacks verify`: the verdict on log fixtures in the exact formats NCCL, nccl-tests,
tf_cnn_benchmarks and our PyTorch script print (see stacks/tools/verify/logs.py for the sources)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stacks.tools.verify.logs import (
    Verdict,
    gpu_name,
    judge_benchmark,
    judge_fabric,
    nccl_evidence,
    peak_bus_bandwidth,
    total_images_per_sec,
)
from tests.components.k8s.jobs.fake_cluster import gpu_world, install
from tests.stack_fixtures import fixture_project_dir

FIXTURES = Path(__file__).resolve().parents[3] / "components" / "k8s" / "jobs" / "fixtures"  # shared with the jobs tests
ROOT = Path(__file__).resolve().parents[4]


def log(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(
    ("fixture", "network", "transport", "version"),
    [
        ("nccl_tests_roce.log", "IB", "roce", "2.27.6"),
        ("nccl_tests_tcp.log", "Socket", "tcp", "2.27.6"),
        ("nccl_tests_fallback.log", "Socket", "tcp", "2.21.5"),
        ("tf_cnn_benchmarks_roce.log", "IB", "roce", "2.9.9"),
        ("tf_cnn_benchmarks_fallback.log", "Socket", "tcp", "2.9.9"),
        ("pytorch_ddp_roce.log", "IB", "roce", "2.27.3"),
        ("pytorch_ddp_tcp.log", "Socket", "tcp", "2.27.3"),
    ],
)
def test_reads_the_network_nccl_used(fixture: str, network: str, transport: str, version: str) -> None:
    evidence = nccl_evidence(log(fixture))
    assert (evidence.network, evidence.transport, evidence.version) == (network, transport, version)


def test_reads_bus_bandwidth_throughput_and_gpu() -> None:
    assert peak_bus_bandwidth(log("nccl_tests_roce.log")) == 11.89
    assert peak_bus_bandwidth(log("nccl_tests_tcp.log")) == 4.23
    assert peak_bus_bandwidth(log("tf_cnn_benchmarks_roce.log")) is None
    assert total_images_per_sec(log("tf_cnn_benchmarks_roce.log")) == pytest.approx(4599.575)
    assert total_images_per_sec(log("pytorch_ddp_roce.log")) == 7412.84
    assert gpu_name(log("tf_cnn_benchmarks_roce.log")) == "GRID V100-16C"
    assert gpu_name(log("pytorch_ddp_roce.log")) == "NVIDIA A100-40C"
    assert gpu_name(log("nccl_tests_roce.log")) == "NVIDIA A100-PCIE-40GB"


def fabric(fixture: str, want: str, *, succeeded: bool = True) -> Verdict:
    verdict = Verdict("nccl-fabric-check")
    judge_fabric(verdict, log(fixture), want=want, link_gbps=100, min_share=0.8, succeeded=succeeded)  # type: ignore[arg-type]
    return verdict


def test_fabric_verdicts_for_roce_tcp_and_a_silent_fallback() -> None:
    roce = fabric("nccl_tests_roce.log", "roce")
    assert roce.passed, roce.render()
    assert "IB [0]vmw_pvrdma0:1/RoCE (NCCL 2.27.6): roce" in roce.render()
    assert "peak 11.89 GB/s = 95.1 % of the 12.50 GB/s link" in roce.render()

    tcp = fabric("nccl_tests_tcp.log", "tcp")
    assert tcp.passed, tcp.render()  # TCP is judged on its transport; its bandwidth is the comparison
    # Each worker's NCCL lists its own rdma0 (192.168.0.51-54); the transport line names one of them.
    assert "Socket [0]rdma0:192.168.0.5" in tcp.render()

    fallback = fabric("nccl_tests_fallback.log", "roce", succeeded=False)
    assert not fallback.passed
    assert "NOT roce" in fallback.render() and "No device found" in fallback.render()

    slow = fabric("nccl_tests_roce_slow.log", "roce")
    assert not slow.passed and "below the required 80 %" in slow.render()


def benchmark(fixture: str, want: str, gpus: int = 4) -> Verdict:
    verdict = Verdict("benchmark")
    judge_benchmark(verdict, log(fixture), want=want, gpus=gpus, succeeded=True)  # type: ignore[arg-type]
    return verdict


def test_benchmark_verdicts_compare_per_gpu_throughput_with_the_reference() -> None:
    tf = benchmark("tf_cnn_benchmarks_roce.log", "roce")
    assert tf.passed
    assert "4599.6 images/sec over 4 GPU(s) = 1149.9 per GPU; 90 % of the V100 reference (1,276" in tf.render()

    pytorch = benchmark("pytorch_ddp_tcp.log", "tcp")
    assert pytorch.passed and "of the A100 reference (2,075" in pytorch.render()

    fallback = benchmark("tf_cnn_benchmarks_fallback.log", "roce")
    assert not fallback.passed and "NCCL fell back" in fallback.render()


def cli(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    cwd = cwd or fixture_project_dir()  # `verify dev` reads the fixture dev, never the user's
    return subprocess.run(
        [sys.executable, "-m", "stacks", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def test_no_kubeconfig_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["PATH"] = str(tmp_path)  # neither pulumi nor kubectl
    result = cli("verify", "dev", env=env)
    assert result.returncode == 2
    assert "Traceback" not in result.stdout + result.stderr
    assert "no kubeconfig" in result.stderr and "--kubeconfig" in result.stderr


def mpijob_object(name: str, state: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": "training"},
        "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {"Worker": {"replicas": 4}}},
        "status": {
            "conditions": [
                {"type": "Created", "status": "True"},
                {"type": "Running", "status": "False"},
                {"type": state, "status": "True"},
            ]
        },
    }


def launcher_pod(
    job: str, suffix: str, created: str, *, restarts: int = 0, state: str = "terminated"
) -> dict[str, Any]:
    """A launcher pod as the MPI Operator v0.8.0 labels it (mpi_job_controller.go defaultLabels)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-launcher-{suffix}",
            "namespace": "training",
            "creationTimestamp": created,
            "labels": {
                "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": job,
                "training.kubeflow.org/job-role": "launcher",
            },
        },
        "status": {
            "containerStatuses": [
                {"name": "launcher", "restartCount": restarts, "state": {state: {}}},
            ]
        },
    }


def fake_cluster(
    tmp_path: Path,
    *,
    mpijobs: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    logs: dict[str, dict[str, str]],
) -> dict[str, str]:
    """PATH and KUBECONFIG for a fake kubectl (fake_cluster_bin.py) that answers from these
    objects and a healthy GPU cluster; `logs` maps a pod name to the fixture of its `current` and
    `previous` run."""
    world = gpu_world()
    world["mpijobs"] = {job["metadata"]["name"]: job for job in mpijobs}
    world["pods"] += pods
    world["logs"] = {pod: {run: log(fixture) for run, fixture in runs.items()} for pod, runs in logs.items()}
    return install(tmp_path, world)


def fake_kubectl(tmp_path: Path, name: str, fixture: str, state: str) -> dict[str, str]:
    """One MPIJob whose one launcher pod ran once."""
    pod = launcher_pod(name, "x7k2p", "2026-03-01T10:00:00Z")
    return fake_cluster(
        tmp_path,
        mpijobs=[mpijob_object(name, state)],
        pods=[pod],
        logs={pod["metadata"]["name"]: {"current": fixture}},
    )


def test_verify_passes_a_roce_fabric_check(tmp_path: Path) -> None:
    env = fake_kubectl(tmp_path, "nccl-fabric-check-roce", "nccl_tests_roce.log", "Succeeded")
    result = cli("verify", "dev", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "transport: IB [0]vmw_pvrdma0:1/RoCE (NCCL 2.27.6): roce, as configured" in result.stdout
    assert result.stdout.rstrip().endswith("verdict: PASS")


def test_verify_fails_a_silent_fallback(tmp_path: Path) -> None:
    env = fake_kubectl(tmp_path, "nccl-fabric-check-roce", "nccl_tests_fallback.log", "Failed")
    result = cli("verify", "dev", env=env)
    assert result.returncode == 1
    assert "NOT roce (jobs.transport): NCCL fell back" in result.stdout
    assert "verdict: FAIL (nccl-fabric-check-roce)" in result.stdout


def test_verify_reports_a_job_that_does_not_exist(tmp_path: Path) -> None:
    env = fake_kubectl(tmp_path, "some-other-job", "nccl_tests_roce.log", "Succeeded")
    result = cli("verify", "dev", env=env)
    assert result.returncode == 1
    assert "no MPIJob nccl-fabric-check-roce in namespace training" in result.stdout
    assert "Traceback" not in result.stderr


# Issue 24, defect 9: verify judged `kubectl logs job/...`: one pod's current container.

JOB = "nccl-fabric-check-roce"


def test_verify_reads_the_newest_launcher_pod(tmp_path: Path) -> None:
    # A retried launcher (backoffLimit): the first pod fell back to sockets, the second passed.
    first = launcher_pod(JOB, "aaaaa", "2026-03-01T10:00:00Z")
    second = launcher_pod(JOB, "bbbbb", "2026-03-01T10:05:00Z")
    env = fake_cluster(
        tmp_path,
        mpijobs=[mpijob_object(JOB, "Succeeded")],
        pods=[first, second],
        logs={
            f"{JOB}-launcher-aaaaa": {"current": "nccl_tests_fallback.log"},
            f"{JOB}-launcher-bbbbb": {"current": "nccl_tests_roce.log"},
        },
    )
    result = cli("verify", "dev", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"log: pod {JOB}-launcher-bbbbb" in result.stdout
    assert "roce, as configured" in result.stdout


def test_verify_reads_the_previous_run_of_a_restarted_launcher(tmp_path: Path) -> None:
    # restartPolicy OnFailure: the container restarted and its new run is still going; the
    # finished run (a fallback) is the one to judge, not the new run's partial log.
    pod = launcher_pod(JOB, "ccccc", "2026-03-01T10:00:00Z", restarts=1, state="running")
    env = fake_cluster(
        tmp_path,
        mpijobs=[mpijob_object(JOB, "Failed")],
        pods=[pod],
        logs={pod["metadata"]["name"]: {"previous": "nccl_tests_fallback.log", "current": "nccl_tests_partial.log"}},
    )
    result = cli("verify", "dev", env=env)
    assert result.returncode == 1
    assert "NOT roce (jobs.transport): NCCL fell back" in result.stdout
    assert "its previous run (the container restarted 1 time(s)" in result.stdout


def test_verify_reads_the_current_run_when_it_has_finished(tmp_path: Path) -> None:
    pod = launcher_pod(JOB, "ddddd", "2026-03-01T10:00:00Z", restarts=2, state="terminated")
    env = fake_cluster(
        tmp_path,
        mpijobs=[mpijob_object(JOB, "Succeeded")],
        pods=[pod],
        logs={pod["metadata"]["name"]: {"previous": "nccl_tests_fallback.log", "current": "nccl_tests_roce.log"}},
    )
    result = cli("verify", "dev", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "run 3 (restarted 2 time(s))" in result.stdout


def test_verify_says_when_no_launcher_pod_is_left(tmp_path: Path) -> None:
    env = fake_cluster(tmp_path, mpijobs=[mpijob_object(JOB, "Failed")], pods=[], logs={})
    result = cli("verify", "dev", env=env)
    assert result.returncode == 1
    assert f"no launcher pod of {JOB} is left" in result.stdout
    assert "Traceback" not in result.stderr
