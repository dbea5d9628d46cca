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
from tests.k8s_jobs.crd_schema import MPIJOB_CRD, load_crd_schema, validate

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
    if MPIJOB_CRD.is_file():
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


def test_roce_workers_get_the_pvrdma_verbs_provider_before_sshd() -> None:
    worker = fabric_job("roce")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    script = worker["command"][2]
    # Only where the image lacks it, from Ubuntu's archive, pinned over MOFED's packages.
    assert "ls /usr/lib/*/libibverbs/libvmw_pvrdma-rdmav*.so" in script
    assert "Pin: release o=Ubuntu" in script and "Pin-Priority: 1001" in script
    assert "--allow-downgrades" in script and "ibverbs-providers" in script
    assert script.index("ibverbs-providers") < script.index("sshd -De")
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


def test_the_launcher_still_judges_the_sweep_after_listing_devices(tmp_path: Path) -> None:
    # The device listing must not reach the verdict's log, nor stop the sweep when it fails.
    job = fabric_job("roce")
    fake = tmp_path / "bin"
    fake.mkdir()
    roce_log = Path(__file__).parent / "fixtures" / "nccl_tests_roce.log"
    (fake / "mpirun").write_text(
        "#!/bin/sh\n"
        'case "$*" in *ibv_devices*) echo "    device  node GUID"; exit 1;; esac\n'
        f"cat {shlex.quote(str(roce_log))}\n"
    )
    (fake / "mpirun").chmod(0o755)
    command = list(job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"])
    verdict_dir = Path(__file__).resolve().parents[2] / "components/k8s/jobs/files"
    command[-1] = (
        command[-1]
        .replace("/opt/gpucluster/", f"{verdict_dir}/")
        .replace("/tmp/all_reduce_perf.log", str(tmp_path / "run.log"))
    )
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "device  node GUID" not in (tmp_path / "run.log").read_text()
    assert "fabric check: PASS" in result.stdout


def _run_worker_start(tmp_path: Path, apt_exit: int) -> subprocess.CompletedProcess[str]:
    """The RoCE worker's start script under bash, with stand-ins: `apt-get` exiting `apt_exit` (as
    apt does, 100, when an index or package cannot be fetched), and sshd, ssh-keygen and mkdir that
    only say they ran. /usr/lib/*/libibverbs has no provider here, so the install step runs."""
    worker = fabric_job("roce")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    script = worker["command"][2]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {
        "apt-get": f"echo apt-get \"$@\"; exit {apt_exit}",
        "ssh-keygen": "echo ssh-keygen",
        "mkdir": "echo mkdir",
    }.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    # The real script execs /usr/sbin/sshd by absolute path and writes apt's preferences under /etc.
    script = script.replace("exec /usr/sbin/sshd", "echo sshd-started").replace("/etc/apt/preferences.d/", f"{tmp_path}/")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=30, check=False)


def test_a_worker_whose_provider_install_fails_still_starts_sshd(tmp_path: Path) -> None:
    """In mpi-operator v0.8 the launcher starts only once every worker is Ready, and a worker whose
    container exited (restartPolicy Never) fails nothing: the MPIJob would wait forever, and
    `stacks verify` say "not finished yet". The install is best effort: sshd starts, the sweep runs,
    and the verdict names the missing RDMA device."""
    run = _run_worker_start(tmp_path, apt_exit=100)
    assert "sshd-started" in run.stdout, run.stdout + run.stderr
    assert "could not install the vmw_pvrdma verbs provider" in run.stderr


def test_the_provider_install_reads_only_the_distributions_sources(tmp_path: Path) -> None:
    """The image keeps MOFED's (linux.mellanox.com) and CUDA's apt sources under sources.list.d; an
    unreachable one fails `apt-get update` although Ubuntu's archive, all the step needs, is there."""
    run = _run_worker_start(tmp_path, apt_exit=0)
    calls = [line for line in run.stdout.splitlines() if line.startswith("apt-get")]
    assert calls and all("Dir::Etc::SourceParts=" in call for call in calls), calls
    assert "sshd-started" in run.stdout
