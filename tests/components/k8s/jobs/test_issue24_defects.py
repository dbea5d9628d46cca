"""Issue 24's defects 6-10 (training jobs and `stacks verify`), each with a test that failed on the
code before its fix (the failure line is quoted in the commit message)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.k8s.jobs import BenchmarkJob, FabricCheckJob, PytorchDdpJob, RunPolicy, WorkerShape
from components.k8s.jobs.benchmark import render_benchmark
from components.k8s.jobs.fabric_check import render_fabric_check
from components.k8s.jobs.pytorch_ddp import render_pytorch_ddp
from stacks.tools.verify.logs import peak_bus_bandwidth
from tests.components.k8s.jobs.crd_schema import MPIJOB_CRD, load_crd_schema, validate

# 10. The nccl-tests result-row regex spanned lines: `\s` under MULTILINE matches a newline.

HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"


def test_a_result_row_broken_across_lines_is_not_read() -> None:
    # Output of two ranks interleaved (or a row cut by a line wrap): the first half of a row on
    # one line, the timings on the next. Read across the newline it would claim 17.83 GB/s.
    broken = HEADER + "   268435456      67108864     float     sum      -1\n   22588.1   11.88   17.83      0\n"
    assert peak_bus_bandwidth(broken) is None


def test_a_row_takes_no_in_place_figures_from_the_next_line() -> None:
    # An out-of-place-only row followed by a line of numbers: the in-place columns are not there.
    row = HEADER + "        1024           256     float     sum      -1    70.31    0.01    0.02      0\n"
    assert peak_bus_bandwidth(row + "   22590.2   11.88   17.83\n") == 0.02


# 8. The fabric check's launcher restarted on a failed verdict: the MPI Operator overwrites the pod
# template's restartPolicy with the replica's, which defaults to OnFailure for the launcher.

OPERATOR_LAUNCHER_DEFAULT = "OnFailure"
"""kubeflow/mpi-operator v0.8.0 pkg/apis/kubeflow/v2beta1/constants.go DefaultLauncherRestartPolicy,
applied by default.go setDefaultsTypeLauncher when the replica names none."""


def launcher_pod_restart_policy(job: dict[str, Any]) -> str:
    """What the operator writes into the launcher Job's pod template: the replica-level policy, the
    template's own is overwritten (mpi_job_controller.go newLauncherPodTemplate, setRestartPolicy;
    ExitCode becomes Never)."""
    replica = job["spec"]["mpiReplicaSpecs"]["Launcher"]
    policy: str = replica.get("restartPolicy", OPERATOR_LAUNCHER_DEFAULT)
    return "Never" if policy == "ExitCode" else policy


@pytest.mark.parametrize("transport", ["roce", "tcp"])
def test_a_failed_fabric_verdict_is_final(transport: str) -> None:
    job = render_fabric_check(FabricCheckJob(workers=4, shape=WorkerShape(transport=transport)))  # type: ignore[arg-type]
    assert launcher_pod_restart_policy(job) == "Never"
    # The launcher is a batch Job: a new pod per failure up to backoffLimit (Kubernetes' default 6).
    assert job["spec"]["runPolicy"]["backoffLimit"] == 0
    # The operator overwrites a template-level policy (and records a warning event): none is set.
    assert "restartPolicy" not in job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    assert validate(load_crd_schema(MPIJOB_CRD, "v2beta1"), job) == []


def test_a_fabric_check_that_would_retry_is_refused() -> None:
    with pytest.raises(ValueError, match=r"run_policy.backoff_limit must be 0"):
        FabricCheckJob(workers=2, run_policy=RunPolicy(backoff_limit=3))


@pytest.mark.parametrize(
    "job",
    [
        render_benchmark(BenchmarkJob(workers=2)),
        render_pytorch_ddp(PytorchDdpJob(workers=2)),
    ],
    ids=["benchmark", "pytorch-ddp"],
)
def test_training_launchers_name_their_restart_policy_at_the_replica(job: dict[str, Any]) -> None:
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]
    assert launcher["restartPolicy"] == "OnFailure"
    assert "restartPolicy" not in launcher["template"]["spec"]


# 7. The fabric check's image had no verbs provider for vmw_pvrdma: its rdma-core is MOFED's
# (linux.mellanox.com's apt repository, coreweave/nccl-tests Dockerfile.ubuntu22), whose
# ibverbs-providers carries the mlx providers only. NCCL then finds no IB device over RoCE.


def fabric_job(transport: str) -> dict[str, Any]:
    return render_fabric_check(FabricCheckJob(workers=4, shape=WorkerShape(transport=transport)))  # type: ignore[arg-type]


def test_roce_workers_install_nothing_at_start() -> None:
    """Issue 34: jobs install nothing at start (an air-gapped site has no archive); the image
    carries the provider (images/site/Dockerfile) or the launcher names the image as the cause."""
    worker = fabric_job("roce")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    script = worker["command"][2]
    assert "apt-get" not in script and "ibverbs-providers" not in script
    assert subprocess.run(["bash", "-n", "-c", script], check=False).returncode == 0


def test_roce_fabric_check_lists_each_workers_verbs_devices_before_the_sweep() -> None:
    script = fabric_job("roce")["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    words = shlex.split(script[-1])
    devices = words[: words.index("||")]
    assert devices[0] == "mpirun" and devices[devices.index("-np") + 1] == "4"
    assert devices[devices.index("-map-by") + 1] == "ppr:1:node"
    assert devices[-3:-1] == ["/bin/sh", "-c"] and devices[-1].endswith("ibv_devices")
    assert words.index(";") < words.index("/opt/nccl-tests/build/all_reduce_perf")


def test_tcp_fabric_check_neither_installs_verbs_nor_lists_devices() -> None:
    job = fabric_job("tcp")
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert "ibverbs-providers" not in worker["command"][2]
    assert "ibv_devices" not in launcher["command"][-1]


def _run_launcher(tmp_path: Path, worker_check: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The RoCE launcher's command under bash with a stand-in `mpirun`: the per-worker check runs
    `worker_check` (a shell body standing for the workers), the sweep prints a real RoCE log."""
    job = fabric_job("roce")
    fake = tmp_path / "bin"
    fake.mkdir()
    roce_log = Path(__file__).parent / "fixtures" / "nccl_tests_roce.log"
    (fake / "mpirun").write_text(
        "#!/bin/sh\n"
        f'case "$*" in *ibv_devices*) {worker_check};; esac\n'
        f"echo swept > {shlex.quote(str(tmp_path / 'swept'))}\n"
        f"cat {shlex.quote(str(roce_log))}\n"
    )
    (fake / "mpirun").chmod(0o755)
    command = list(job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"])
    verdict_dir = Path(__file__).resolve().parents[4] / "components/k8s/jobs/files"
    command[-1] = (
        command[-1]
        .replace("/opt/gpucluster/", f"{verdict_dir}/")
        .replace("/tmp/all_reduce_perf.log", str(tmp_path / "run.log"))
    )
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    run = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=60)
    return run, tmp_path / "swept"


def test_the_launcher_judges_the_sweep_after_every_worker_showed_its_devices(tmp_path: Path) -> None:
    run, swept = _run_launcher(tmp_path, 'echo "    device  node GUID"; echo "    vmw_pvrdma0"; exit 0')
    assert run.returncode == 0, run.stdout + run.stderr
    assert swept.exists()
    assert "device  node GUID" not in (tmp_path / "run.log").read_text()
    assert "fabric check: PASS" in run.stdout


def test_a_worker_image_without_the_provider_stops_the_check_before_the_sweep(tmp_path: Path) -> None:
    """The per-worker step itself, run here where /usr/lib/*/libibverbs has no vmw_pvrdma provider
    (as in the default image's MOFED rdma-core): the check says so and never sweeps."""
    assert not list(Path("/usr/lib").glob("*/libibverbs/libvmw_pvrdma-rdmav*.so"))
    run, swept = _run_launcher(tmp_path, 'sh -c "$(eval echo \\${$#})"; exit $?')
    assert run.returncode == 3, run.stdout + run.stderr
    assert "has no vmw_pvrdma verbs provider" in run.stderr
    assert "jobs.siteImage" in run.stderr
    assert "stopped before the sweep" in run.stderr
    assert not swept.exists()


def test_a_worker_image_without_sshd_says_so_instead_of_installing_it(tmp_path: Path) -> None:
    worker = fabric_job("tcp")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    script = worker["command"][2].replace("/usr/sbin/sshd", str(tmp_path / "no-sshd"))
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=False)
    assert run.returncode == 1
    assert "this image has no sshd" in run.stderr and "jobs.siteImage" in run.stderr
