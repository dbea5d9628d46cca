"""`verify`'s coverage judge (stacks/tools/verify/coverage.py): every GPU worker and every GPU ran a
rank, each worker's NCCL opened its RDMA device (issue 54 item 2), on logs in NCCL's and
nccl-tests' own line formats."""

from __future__ import annotations

from pathlib import Path

from stacks.tools.verify.coverage import coverage, judge_coverage
from stacks.tools.verify.logs import Verdict
from tests.six_by_two import WORKERS

SAMPLES = Path(__file__).resolve().parents[4] / "docs" / "samples"
PASS_LOG = (SAMPLES / "fabric-check-roce-pass.log").read_text()
JOB = "nccl-fabric-check-roce"


def estate_log(*, without_nic: str | None = None) -> str:
    """A launcher log of the fabric check on issue 54's estate (tests/six_by_two.py): 6 workers x 2
    L40S, 12 ranks, each rank's NCCL lines with its pod's hostname (src/debug.cc prefix)."""
    lines = []
    ranks = [(w, d) for w in range(6) for d in range(2)]
    for rank, (worker, device) in enumerate(ranks):
        lines.append(
            f"#  Rank {rank:2d} Group  0 Pid {60 + device:6d} on {JOB}-worker-{worker} device {device:2d} "
            f"[0000:{11 + device:02x}:00] NVIDIA L40S-48C"
        )
    for rank, (worker, device) in enumerate(ranks):
        host = f"{JOB}-worker-{worker}"
        prefix = f"{host}:{60 + device}:{77 + device} [{device}] NCCL INFO "
        if host != without_nic:
            lines.append(prefix + f"NET/IB : Using [0]vmw_pvrdma0:1/RoCE [RO]; OOB eth0:10.244.{worker}.9<0>")
            lines.append(prefix + "Using network IB")
        lines.append(
            prefix + f"ncclCommInitRank comm 0x55d5c2b0 rank {rank} nranks 12 cudaDev {device} nvmlDev {device} "
            "busId b000 commId 0x8e1f3a7c5d6b4a21 - Init COMPLETE"
        )
    return "\n".join(lines) + "\n"


def judged(log: str, *, workers: int, gpus: int) -> Verdict:
    verdict = Verdict(JOB)
    judge_coverage(verdict, log, want="roce", workers=workers, gpus=gpus)
    return verdict


def test_twelve_ranks_on_six_workers_each_through_its_pvrdma_device_pass() -> None:
    verdict = judged(estate_log(), workers=len(WORKERS), gpus=12)
    assert verdict.passed, verdict.lines
    [line] = verdict.lines
    assert line.startswith("coverage: 12 ranks on all 6 GPU workers, each through NET/IB: ")
    assert all(f"{JOB}-worker-{w} [0]vmw_pvrdma0:1/RoCE" in line for w in range(6))


def test_a_worker_whose_nic_is_missing_from_the_log_fails_by_name() -> None:
    verdict = judged(estate_log(without_nic=f"{JOB}-worker-4"), workers=6, gpus=12)
    assert not verdict.passed
    [line] = verdict.lines
    assert line.startswith(f"coverage: no 'NET/IB : Using [N]<device>' line from {JOB}-worker-4: ")


def test_the_issue_54_run_six_ranks_on_three_hosts_fails() -> None:
    """Six one-GPU ranks, two per node, on three of six workers: what the old wiring ran."""
    log = "\n".join(line for line in estate_log().splitlines() if "worker-3" not in line and "worker-4" not in line)
    log = "\n".join(line for line in log.splitlines() if "worker-5" not in line)
    verdict = judged(log, workers=6, gpus=12)
    assert not verdict.passed
    assert verdict.lines[0].startswith(
        "coverage: 6 rank(s) ran, the stack's GPU workers have 12 GPUs; ranks on 3 of the 6 GPU workers "
        f"({JOB}-worker-0, {JOB}-worker-1, {JOB}-worker-2)"
    )


def test_nccls_init_lines_name_the_ranks_when_nccl_tests_did_not() -> None:
    log = "\n".join(line for line in estate_log().splitlines() if not line.startswith("#"))
    found = coverage(log, "roce")
    assert sorted(found.ranks) == list(range(12))
    assert found.hosts == [f"{JOB}-worker-{w}" for w in range(6)]


def test_a_log_without_per_rank_lines_cannot_pass() -> None:
    verdict = judged("# Avg bus bandwidth    : 10.1\n", workers=6, gpus=12)
    assert not verdict.passed
    assert "no rank's hostname in the log" in verdict.lines[0]


def test_the_shipped_pass_sample_fails_without_one_workers_device_line() -> None:
    log = "\n".join(line for line in PASS_LOG.splitlines() if not ("worker-3:" in line and "NET/IB : Using" in line))
    assert judged(PASS_LOG, workers=4, gpus=4).passed
    verdict = judged(log, workers=4, gpus=4)
    assert not verdict.passed
    assert f"line from {JOB}-worker-3: " in verdict.lines[0]
