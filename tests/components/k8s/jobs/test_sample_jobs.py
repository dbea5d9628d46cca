"""What a user of the sample jobs would notice: ranks, GPUs, the transport switch, /dev/shm."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from components.k8s.jobs.benchmark import BenchmarkJob, render_benchmark
from components.k8s.jobs.fabric_check import FabricCheckJob, render_fabric_check
from components.k8s.jobs.mpijob import nccl_transport_env
from components.k8s.jobs.pods import WorkerShape
from components.k8s.jobs.pytorch_ddp import PytorchDdpJob, render_pytorch_ddp

TRANSPORT_VARIABLES = ("NCCL_NET", "NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME", "HOROVOD_MPI_THREADS_DISABLE")


def replica(job: dict[str, Any], role: str) -> dict[str, Any]:
    replica_spec: dict[str, Any] = job["spec"]["mpiReplicaSpecs"][role]
    return replica_spec


def container(job: dict[str, Any], role: str) -> dict[str, Any]:
    [found] = replica(job, role)["template"]["spec"]["containers"]
    return found


def launcher_env(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container(job, "Launcher")["env"]}


def mpirun(job: dict[str, Any]) -> list[str]:
    """The mpirun line, whether the launcher runs it directly or in a shell (the fabric check)."""
    command: list[str] = container(job, "Launcher")["command"]
    if command[0] == "mpirun":
        return command
    words = shlex.split(command[-1])
    end = words.index("2>&1")
    # The fabric check over RoCE lists each worker's verbs devices first (`... ; mpirun ...`).
    start = max((i + 1 for i, word in enumerate(words[:end]) if word == ";"), default=0)
    return words[start:end]


def exported(job: dict[str, Any]) -> list[str]:
    command = mpirun(job)
    return [command[i + 1] for i, part in enumerate(command) if part == "-x"]


def np_of(job: dict[str, Any]) -> int:
    command = mpirun(job)
    return int(command[command.index("-np") + 1])


def both(**kwargs: Any) -> list[dict[str, Any]]:
    """Every job kind with the same settings: both benchmarks and the fabric check."""
    return [
        render_benchmark(BenchmarkJob(**kwargs)),
        render_pytorch_ddp(PytorchDdpJob(**kwargs)),
        render_fabric_check(FabricCheckJob(**kwargs)),
    ]


@pytest.mark.parametrize(("workers", "gpus"), [(1, 1), (4, 1), (4, 2), (2, 8)])
def test_np_follows_worker_count_and_slots(workers: int, gpus: int) -> None:
    for job in both(workers=workers, shape=WorkerShape(gpus=gpus)):
        assert np_of(job) == workers * gpus
        assert job["spec"]["slotsPerWorker"] == gpus
        assert replica(job, "Worker")["replicas"] == workers
        limits = container(job, "Worker")["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == gpus


def test_roce_uses_the_rdma_device_without_privilege() -> None:
    for job in both(workers=4):
        env = launcher_env(job)
        assert env["NCCL_IB_DISABLE"] == "0"
        assert env["NCCL_NET_GDR_LEVEL"] == "LOC"  # NCCL reads no NCCL_IB_GDR_LEVEL
        assert env["HOROVOD_MPI_THREADS_DISABLE"] == "1"
        assert env["NCCL_DEBUG"] == "INFO"
        for name in (*TRANSPORT_VARIABLES, "NCCL_DEBUG"):
            assert name in exported(job)
        worker = container(job, "Worker")
        assert worker["resources"]["limits"]["rdma/pvrdma"] == 1
        assert worker["securityContext"] == {"privileged": False, "capabilities": {"add": ["IPC_LOCK"]}}
        pod = replica(job, "Worker")["template"]["spec"]
        assert not [v for v in pod["volumes"] if "hostPath" in v]


def test_tcp_flips_the_transport_and_drops_the_rdma_request() -> None:
    for job in both(workers=4, shape=WorkerShape(transport="tcp")):
        env = launcher_env(job)
        assert env["NCCL_IB_DISABLE"] == "1"
        assert env["HOROVOD_MPI_THREADS_DISABLE"] == "0"
        assert "NCCL_NET_GDR_LEVEL" not in env  # no IB, nothing to tune
        assert "NCCL_IB_HCA" not in exported(job)
        assert env["NCCL_DEBUG"] == "INFO"
        worker = container(job, "Worker")
        assert not [r for r in worker["resources"]["limits"] if r.startswith("rdma/")]
        # No IPC_LOCK over TCP; on the host network NET_RAW is dropped (issue 40 item 7).
        assert worker["securityContext"]["capabilities"] == {"drop": ["NET_RAW"]}


def test_transport_env_is_explicit_for_both_transports() -> None:
    common = {"NCCL_DEBUG": "INFO", "NCCL_NET_PLUGIN": "none", "NCCL_IBEXT_DISABLE": "1"}
    assert nccl_transport_env("roce") == {
        **common,
        "NCCL_NET": "IB",
        "NCCL_IB_DISABLE": "0",
        "NCCL_IB_HCA": "vmw_pvrdma",
        "NCCL_IB_GID_INDEX": "1",
        "NCCL_NET_GDR_LEVEL": "LOC",
        "NCCL_SOCKET_IFNAME": "=eth0",
        "HOROVOD_MPI_THREADS_DISABLE": "1",
    }
    assert nccl_transport_env("tcp") == {
        **common,
        "NCCL_NET": "Socket",
        "NCCL_IB_DISABLE": "1",
        "NCCL_SOCKET_IFNAME": "=rdma0",
        "HOROVOD_MPI_THREADS_DISABLE": "0",
    }
    with pytest.raises(ValueError, match="'roce' or 'tcp'"):
        nccl_transport_env("ib")  # type: ignore[arg-type]


def test_extra_env_overrides_the_transport_for_every_rank() -> None:
    for job in both(workers=2, extra_env={"NCCL_IB_GID_INDEX": "3", "NCCL_DEBUG_SUBSYS": "INIT,NET"}):
        env = launcher_env(job)
        assert env["NCCL_IB_GID_INDEX"] == "3"
        assert {"NCCL_IB_GID_INDEX", "NCCL_DEBUG_SUBSYS"} <= set(exported(job))


def test_rdma_resource_name_comes_from_the_settings() -> None:
    for job in both(workers=2, shape=WorkerShape(rdma_resource="rdma/hca_shared")):
        limits = container(job, "Worker")["resources"]["limits"]
        assert limits["rdma/hca_shared"] == 1
        assert "rdma/pvrdma" not in limits


def test_dev_shm_is_memory_backed_with_the_configured_size() -> None:
    for size, jobs in (("8Gi", both(workers=2)), ("16Gi", both(workers=2, shape=WorkerShape(shm_size="16Gi")))):
        for job in jobs:
            pod = replica(job, "Worker")["template"]["spec"]
            [shm] = [v for v in pod["volumes"] if v["name"] == "dshm"]
            assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": size}
            mounts = {m["mountPath"]: m["name"] for m in container(job, "Worker")["volumeMounts"]}
            assert mounts["/dev/shm"] == "dshm"


def test_workers_select_and_tolerate_gpu_nodes_and_run_sshd() -> None:
    for job in both(workers=2):
        pod = replica(job, "Worker")["template"]["spec"]
        assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        assert "sshd -De" in " ".join(container(job, "Worker")["command"])
        assert pod["runtimeClassName"] == "nvidia"
        launcher_pod = replica(job, "Launcher")["template"]["spec"]
        assert "nvidia.com/gpu" not in str(launcher_pod["containers"][0]["resources"])


def test_benchmark_runs_the_reference_configuration() -> None:
    job = render_benchmark(BenchmarkJob(workers=4))
    command = container(job, "Launcher")["command"]
    assert container(job, "Launcher")["image"] == "horovod/horovod:0.28.1"
    program = command[command.index("python") :]
    assert program[1].endswith("tf_cnn_benchmarks/tf_cnn_benchmarks.py")
    for flag in (
        "--model=resnet50",
        "--batch_size=32",
        "--use_fp16",
        "--xla=True",
        "--variable_update=horovod",
        "--num_gpus=1",
    ):
        assert flag in program
    # Nothing fetched at start: the image carries the scripts (docs/air-gapped.md).
    assert "initContainers" not in replica(job, "Worker")["template"]["spec"]


def test_benchmark_model_batch_and_steps_are_configurable() -> None:
    job = render_benchmark(
        BenchmarkJob(
            workers=2,
            model="resnet101",
            batch_size=64,
            num_batches=500,
            use_fp16=False,
            xla=False,
            script_path="/opt/bench/tf_cnn_benchmarks.py",
            extra_env={"NCCL_IB_HCA": "vmw_pvrdma0"},
        )
    )
    command = container(job, "Launcher")["command"]
    assert {"--model=resnet101", "--batch_size=64", "--num_batches=500"} <= set(command)
    assert "--use_fp16" not in command and "--xla=True" not in command
    assert "/opt/bench/tf_cnn_benchmarks.py" in command
    assert "initContainers" not in replica(job, "Worker")["template"]["spec"]
    assert launcher_env(job)["NCCL_IB_HCA"] == "vmw_pvrdma0"
    assert "NCCL_IB_HCA" in exported(job)


def test_fabric_check_sweeps_all_reduce_as_specified() -> None:
    job = render_fabric_check(FabricCheckJob(workers=4))
    command = container(job, "Launcher")["command"]
    program = mpirun(job)[mpirun(job).index("/opt/nccl-tests/build/all_reduce_perf") :]
    assert program == [
        "/opt/nccl-tests/build/all_reduce_perf",
        "-b",
        "8",
        "-e",
        "4G",
        "-f",
        "2",
        "-g",
        "1",
    ]
    # ... and the verdict, which also wants every worker (4) and rank (4 x 1 GPU) in the log.
    assert command[-1].endswith(
        "exec /bin/sh /opt/gpucluster/fabric_verdict.sh roce 100 0.8 /tmp/all_reduce_perf.log 4 4"
    )
    image = container(job, "Launcher")["image"]
    assert image.startswith("ghcr.io/coreweave/nccl-tests:12.4.1") and "nccl2.27.6" in image  # NCCL >= 2.26
    assert container(job, "Worker")["image"] == image


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: BenchmarkJob(workers=0), "at least one worker"),
        (lambda: FabricCheckJob(workers=0), "at least one worker"),
        (lambda: BenchmarkJob(workers=1, image="horovod/horovod:latest"), "not pinned"),
        (lambda: FabricCheckJob(workers=1, image="mpioperator/nccl-tests"), "not pinned"),
        (lambda: BenchmarkJob(workers=1, batch_size=0), "must be positive"),
        (lambda: WorkerShape(gpus=0), "at least one GPU"),
        (lambda: WorkerShape(transport="ib"), "'roce' or 'tcp'"),  # type: ignore[arg-type]
        (lambda: WorkerShape(rdma_resource="pvrdma"), "<prefix>/<name>"),
        (lambda: FabricCheckJob(workers=1, step_factor=1), "step_factor"),
    ],
)
def test_bad_job_settings_are_rejected(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()
