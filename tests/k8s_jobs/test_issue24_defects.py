"""Issue 24's defects 6-10 (training jobs and `stacks verify`), each with a test that failed on the
code before its fix (the failure line is quoted in the commit message)."""

from __future__ import annotations

from typing import Any

import pytest

from components.k8s.jobs import BenchmarkJob, FabricCheckJob, PytorchDdpJob, RunPolicy, WorkerShape
from components.k8s.jobs.benchmark import render_benchmark
from components.k8s.jobs.fabric_check import render_fabric_check
from components.k8s.jobs.pytorch_ddp import render_pytorch_ddp
from stacks.tools.verify_logs import peak_bus_bandwidth
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
