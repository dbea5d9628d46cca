"""Issue 16's defects, each checked against what the real machine does with the rendered jobs.

Every test here failed on the code before the fix (run against a `git archive` of the parent commit).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from components.k8s.gpu_runtime import NVIDIA_RUNTIME_CLASS
from components.k8s.jobs import BenchmarkJob, FabricCheckJob, TrainingJobsArgs, WorkerShape
from components.k8s.jobs.benchmark import render_benchmark
from components.k8s.jobs.fabric_check import render_fabric_check
from tests.components.k8s.jobs.sshd_real import home_folder, mount_ssh_secret, require_sshd, run_sshd, ssh_login

FIXTURES = Path(__file__).parent / "fixtures"
VERDICT = Path(__file__).resolve().parents[4] / "components/k8s/jobs/files/fabric_verdict.sh"


def pod(job: dict[str, Any], role: str) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]
    return spec


def launcher_env(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod(job, "Launcher")["containers"][0]["env"]}


def mpirun_argv(job: dict[str, Any]) -> list[str]:
    """The mpirun line, whether the launcher runs it directly or inside a shell."""
    command: list[str] = pod(job, "Launcher")["containers"][0]["command"]
    if command[0] == "mpirun":
        return command
    words = shlex.split(command[-1])
    end = words.index("2>&1")
    # The fabric check over RoCE lists each worker's verbs devices first (`... ; mpirun ...`).
    start = max((i + 1 for i, word in enumerate(words[:end]) if word == ";"), default=0)
    return words[start:end]


def every_job(transport: str) -> list[dict[str, Any]]:
    shape = WorkerShape(transport=transport)  # type: ignore[arg-type]
    return [
        render_benchmark(BenchmarkJob(workers=4, shape=shape)),
        render_fabric_check(FabricCheckJob(workers=4, shape=shape)),
    ]


# 1. The workers refuse ssh: sshd's StrictModes rejects the Secret-mounted /root/.ssh.


def sshd_words(job: dict[str, Any]) -> list[str]:
    script = pod(job, "Worker")["containers"][0]["command"][-1]
    [line] = [part for part in script.split("&&") if "sshd -" in part]
    return shlex.split(line.replace("exec ", ""))


@pytest.mark.parametrize("transport", ["roce", "tcp"])
def test_worker_sshd_runs_without_strict_modes(transport: str) -> None:
    for job in every_job(transport):
        words = sshd_words(job)
        assert words[0] == "/usr/sbin/sshd"
        options = [words[i + 1] for i, word in enumerate(words) if word == "-o"]
        assert "StrictModes=no" in options, words


def test_sshd_itself_reports_strict_modes_off(tmp_path: Path) -> None:
    """Ask the real sshd for its effective configuration with our command line."""
    require_sshd()
    words = sshd_words(every_job("roce")[0])
    key = tmp_path / "host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    flags = [w for w in words[1:] if w != "-De"]
    result = subprocess.run(
        ["/usr/sbin/sshd", "-T", "-f", "/dev/null", "-h", str(key), *flags], capture_output=True, text=True, check=False
    )
    assert "strictmodes no" in result.stdout.lower(), result.stderr


def launcher_ssh_options(job: dict[str, Any]) -> list[str]:
    argv = mpirun_argv(job)
    return shlex.split(argv[argv.index("plm_rsh_args") + 1])


@pytest.mark.parametrize("transport", ["roce", "tcp"])
def test_the_launcher_logs_in_to_the_benchmark_workers_sshd_with_the_operators_keys(transport: str) -> None:
    """A real sshd with the worker's command line, a real ssh with the launcher's options, the keys
    mounted as the MPI Operator mounts them (see sshd_real)."""
    require_sshd()
    job = render_benchmark(BenchmarkJob(workers=2, shape=WorkerShape(transport=transport)))  # type: ignore[arg-type]
    with home_folder() as home:
        secret = mount_ssh_secret(home)
        with run_sshd(sshd_words(job), secret, home) as sshd:
            login = ssh_login(launcher_ssh_options(job), sshd.port, secret.private_key)
        assert login.returncode == 0, login.stderr + sshd.output()
    assert login.stdout.strip() == f"logged-in-as-{os.geteuid()}"


def test_without_strict_modes_off_sshd_refuses_the_operators_mount() -> None:
    """The layout is no kinder than the kubelet's: sshd's default StrictModes refuses it, so the
    `-o StrictModes=no` on the worker's command line is what lets the launcher in."""
    require_sshd()
    job = render_benchmark(BenchmarkJob(workers=2))
    words = sshd_words(job)
    at = words.index("StrictModes=no")
    strict = words[: at - 1] + words[at + 1 :]
    with home_folder() as home:
        secret = mount_ssh_secret(home)
        with run_sshd(strict, secret, home) as sshd:
            login = ssh_login(launcher_ssh_options(job), sshd.port, secret.private_key)
            time.sleep(0.2)  # sshd writes its refusal just after it answers
            log = sshd.output()
    assert login.returncode == 255 and "Permission denied (publickey" in login.stderr
    assert f"Authentication refused: bad ownership or modes for directory {secret.path}" in log


def test_the_operators_0600_mode_is_what_lets_ssh_use_the_key() -> None:
    """With the Secret's default mode (0644) the ssh client itself refuses the private key; the
    operator sets 0600 for /root/.ssh, our default `ssh_auth_mount_path`."""
    require_sshd()
    job = render_benchmark(BenchmarkJob(workers=2))
    with home_folder() as home:
        secret = mount_ssh_secret(home, mode=0o644)
        with run_sshd(sshd_words(job), secret, home) as sshd:
            login = ssh_login(launcher_ssh_options(job), sshd.port, secret.private_key)
    assert login.returncode == 255
    assert "UNPROTECTED PRIVATE KEY FILE" in login.stderr and "are too open" in login.stderr


def test_launcher_ssh_reaches_the_worker_sshd_port_without_host_key_prompts() -> None:
    for job in every_job("tcp"):
        argv = mpirun_argv(job)
        rsh = argv[argv.index("plm_rsh_args") + 1]
        port = sshd_words(job)[sshd_words(job).index("-p") + 1]
        assert f"-p {port}" in rsh
        assert "StrictHostKeyChecking=no" in rsh and "UserKnownHostsFile=/dev/null" in rsh
        probe = pod(job, "Worker")["containers"][0]["readinessProbe"]["tcpSocket"]["port"]
        assert str(probe) == port


# 2. The two jobs can deadlock: both want every GPU and neither can start with half of them.


def test_jobs_that_cannot_hold_their_gpus_together_are_refused() -> None:
    with pytest.raises(ValueError, match="deadlock"):
        TrainingJobsArgs(
            provider=None,  # type: ignore[arg-type]
            benchmark=BenchmarkJob(workers=4),
            fabric_check=FabricCheckJob(workers=4),
            gpus_available=4,
        )
    # Together they fit: accepted.
    TrainingJobsArgs(
        provider=None,  # type: ignore[arg-type]
        benchmark=BenchmarkJob(workers=2),
        fabric_check=FabricCheckJob(workers=2),
        gpus_available=4,
    )


# 3. The transport is implicit.


def test_roce_names_the_network_the_device_and_the_gid_for_every_job() -> None:
    for job in every_job("roce"):
        env = launcher_env(job)
        assert env["NCCL_NET"] == "IB"
        assert env["NCCL_NET_PLUGIN"] == "none"  # no HPC-X libnccl-net.so
        assert env["NCCL_IBEXT_DISABLE"] == "1"  # what that plugin reads instead of NCCL_IB_DISABLE
        assert env["NCCL_IB_HCA"] == "vmw_pvrdma"
        assert env["NCCL_IB_GID_INDEX"] == "1"  # not 0, the link-local GID
        assert env["NCCL_SOCKET_IFNAME"] == "=eth0"
        assert env["NCCL_NET_GDR_LEVEL"] == "LOC"
        exported = [argv for i, argv in enumerate(mpirun_argv(job)) if i and mpirun_argv(job)[i - 1] == "-x"]
        assert set(env) <= set(exported)


def test_tcp_names_the_socket_network_for_every_job() -> None:
    for job in every_job("tcp"):
        env = launcher_env(job)
        assert env["NCCL_NET"] == "Socket"
        assert env["NCCL_NET_PLUGIN"] == "none"
        assert env["NCCL_IB_DISABLE"] == "1"


# 4. RoCE vs TCP is not the same link: TCP must use the PVRDMA NIC, not the pod network.


def pvrdma_interface_name() -> str:
    """The name cloud-init gives the PVRDMA NIC in the guest, from the metadata we render."""
    import json
    from ipaddress import IPv4Address, IPv4Network

    from components.vsphere.first_boot import NicAddress, metadata_document

    rdma = NicAddress(role="rdma", address=IPv4Address("192.168.0.51"), network=IPv4Network("192.168.0.0/24"))
    mgmt = NicAddress(role="management", address=IPv4Address("10.10.0.51"), network=IPv4Network("10.10.0.0/24"))
    document = json.loads(
        metadata_document(
            instance_id="i", hostname="w", nics=[mgmt, rdma], dns_servers=[IPv4Address("10.10.0.2")], dns_domain="lab"
        )
    )
    [name] = [n for n, e in document["network"]["ethernets"].items() if e["match"]["macaddress"] == rdma.mac]
    return str(document["network"]["ethernets"][name].get("set-name", name))


def test_tcp_runs_on_the_host_network_over_the_pvrdma_nic() -> None:
    nic = pvrdma_interface_name()
    for job in every_job("tcp"):
        assert pod(job, "Worker").get("hostNetwork") is True
        assert launcher_env(job)["NCCL_SOCKET_IFNAME"] == f"={nic}"
        # sshd's port is declared, so the scheduler keeps two such workers off one node.
        assert pod(job, "Worker")["containers"][0]["ports"] == [
            {"name": "ssh", "containerPort": 2222, "protocol": "TCP"}
        ]
    for job in every_job("roce"):
        assert "hostNetwork" not in pod(job, "Worker")


# 5. A fallback passes: the fabric check must fail when NCCL fell back or the bandwidth is low.


def run_launcher(job: dict[str, Any], log: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The launcher's real command, with `mpirun` printing a recorded run of all_reduce_perf."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "mpirun").write_text(f"#!/bin/sh\ncat {shlex.quote(str(log))}\n")
    (fake / "mpirun").chmod(0o755)
    command = list(pod(job, "Launcher")["containers"][0]["command"])
    mounts = {m["name"]: m["mountPath"] for m in pod(job, "Launcher")["containers"][0].get("volumeMounts", [])}
    if mounts:
        command[-1] = command[-1].replace(f"{next(iter(mounts.values()))}/", f"{VERDICT.parent}/")
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=60)


@pytest.mark.parametrize(
    ("transport", "log", "passes"),
    [
        ("roce", "nccl_tests_roce.log", True),
        ("roce", "nccl_tests_fallback.log", False),
        ("roce", "nccl_tests_tcp.log", False),
        ("roce", "nccl_tests_roce_slow.log", False),
        ("tcp", "nccl_tests_tcp.log", True),
        ("tcp", "nccl_tests_roce.log", False),
    ],
)
def test_fabric_check_launcher_fails_on_a_fallback_or_low_bandwidth(
    transport: str, log: str, passes: bool, tmp_path: Path
) -> None:
    job = render_fabric_check(FabricCheckJob(workers=4, shape=WorkerShape(transport=transport)))  # type: ignore[arg-type]
    result = run_launcher(job, FIXTURES / log, tmp_path)
    assert (result.returncode == 0) is passes, result.stdout + result.stderr


def test_gpu_workers_name_the_nvidia_runtime_class() -> None:
    for transport in ("roce", "tcp"):
        for job in every_job(transport):
            assert pod(job, "Worker")["runtimeClassName"] == NVIDIA_RUNTIME_CLASS
            assert "runtimeClassName" not in pod(job, "Launcher")  # no GPU there
