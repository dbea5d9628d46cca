"""`python -m stacks verify STACK --log FILE` (issue 25, item 2): the verdict on a saved launcher
log, with the live path's rules and exit codes and no cluster; the samples shipped under
docs/samples/ are the ones the README tells a newcomer to try."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from stacks.tools.verify.logs import nccl_evidence, peak_bus_bandwidth
from tests.stack_fixtures import fixture_project_dir, fixture_stack

ROOT = Path(__file__).resolve().parents[4]
SAMPLES = ROOT / "docs" / "samples"
PASS_SAMPLE = SAMPLES / "fabric-check-roce-pass.log"
FALLBACK_SAMPLE = SAMPLES / "fabric-check-socket-fallback-fail.log"
PARTIAL_SAMPLE = SAMPLES / "fabric-check-roce-partial-fail.log"
FIXTURES = (
    Path(__file__).resolve().parents[3] / "components" / "k8s" / "jobs" / "fixtures"
)  # shared with the jobs tests


def verify(*args: str) -> subprocess.CompletedProcess[str]:
    # PATH without kubectl or pulumi: --log must need neither.
    return subprocess.run(
        [sys.executable, "-m", "stacks", "verify", *args],
        capture_output=True,
        text=True,
        cwd=fixture_project_dir(),
        env={"PATH": "/nonexistent", "PYTHONDONTWRITEBYTECODE": "1"},
        timeout=120,
    )


def test_the_shipped_roce_sample_passes() -> None:
    # The README runs it with the relative path in the project: tests/workflow/test_quick_start.py.
    result = verify("dev", "--log", str(PASS_SAMPLE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "transport: IB [0]vmw_pvrdma0:1/RoCE (NCCL 2.27.6): roce, as configured" in result.stdout
    assert "state: the launcher's own verdict: PASS" in result.stdout
    assert result.stdout.rstrip().endswith("verdict: PASS")


def test_the_shipped_socket_fallback_sample_fails() -> None:
    result = verify("dev", "--log", str(FALLBACK_SAMPLE))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "NOT roce (jobs.transport): NCCL fell back" in result.stdout
    assert "after 'NET/IB : No device found'" in result.stdout
    assert "below the required 80 %" in result.stdout
    assert "verdict: FAIL (nccl-fabric-check-roce)" in result.stdout
    assert "Traceback" not in result.stderr


def test_the_shipped_partial_run_sample_fails_though_its_launcher_said_pass() -> None:
    """Issue 54 item 2: three of the dev stack's four workers ran, at full bandwidth, and the
    launcher's own verdict was PASS; the fourth worker's NIC is in no line of the log."""
    result = verify("dev", "--log", str(PARTIAL_SAMPLE))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "state: the launcher's own verdict: PASS" in result.stdout
    assert (
        "coverage: 3 rank(s) ran, the stack's GPU workers have 4 GPUs; ranks on 3 of the 4 GPU workers" in result.stdout
    )
    assert result.stdout.rstrip().endswith("verdict: FAIL (nccl-fabric-check-roce)")


def test_a_missing_log_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "launcher.log"
    result = verify("dev", "--log", str(missing))
    assert result.returncode == 2
    assert (
        result.stderr.strip() == f"error: --log {missing}: no such file (save one with `kubectl logs POD > {missing}`)"
    )
    assert "Traceback" not in result.stdout + result.stderr


def test_a_folder_is_a_clear_error(tmp_path: Path) -> None:
    result = verify("dev", "--log", str(tmp_path))
    assert result.returncode == 2
    assert "is a folder, not a log file" in result.stderr and "Traceback" not in result.stderr


def test_log_and_kubeconfig_are_one_or_the_other() -> None:
    result = verify("dev", "--log", str(PASS_SAMPLE), "--kubeconfig", "kubeconfig")
    assert result.returncode == 2
    assert "not allowed with argument" in result.stderr


def test_a_benchmark_log_is_judged_as_the_benchmark() -> None:
    # dev runs the fabric check only; the log itself says it is the PyTorch benchmark's.
    result = verify("dev", "--log", str(FIXTURES / "pytorch_ddp_roce.log"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("pytorch-ddp-resnet50-roce:\n")
    assert "state: unknown (a saved log does not say how the MPIJob ended)" in result.stdout
    assert "7412.8 images/sec over 4 GPU(s)" in result.stdout


def test_a_log_of_something_else_fails_on_what_it_lacks() -> None:
    result = verify("dev", "--log", str(ROOT / "README.md"))
    assert result.returncode == 1
    assert "neither nccl-tests nor benchmark output; judged as nccl-fabric-check-roce" in result.stdout
    assert "NCCL logged no network" in result.stdout


def test_the_stack_decides_what_is_expected(tmp_path: Path) -> None:
    # The same RoCE log judged against a stack whose jobs run over TCP fails by that stack's rule.
    stack = tmp_path / "Pulumi.qa.yaml"
    stack.write_text((fixture_stack("dev")).read_text().replace("transport: roce", "transport: tcp"))
    result = verify("qa", "--file", str(stack), "--log", str(PASS_SAMPLE))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("nccl-fabric-check-tcp:\n")
    assert "NOT tcp (jobs.transport): NCCL fell back" in result.stdout


# nccl-tests common.cu: a row is `size count type redop root` then, out-of-place and in-place,
# `time algbw busbw #wrong`; all_reduce's busbw = algbw * 2(n-1)/n (nccl-tests doc/PERFORMANCE.md);
# `# Avg bus bandwidth` is the mean busbw of every row and both placements.
ROW = re.compile(
    r"^ +(\d+) +(\d+) +float +sum +-1 +([\d.]+) +([\d.]+) +([\d.]+) +0 +([\d.]+) +([\d.]+) +([\d.]+) +0$", re.M
)


@pytest.mark.parametrize("sample", [PASS_SAMPLE, FALLBACK_SAMPLE, PARTIAL_SAMPLE], ids=lambda p: p.name)
def test_the_samples_numbers_agree_with_each_other(sample: Path) -> None:
    text = sample.read_text()
    ranks = len(re.findall(r"^#  Rank +\d+ ", text, re.M))
    rows = ROW.findall(text)
    assert ranks == (3 if sample == PARTIAL_SAMPLE else 4) and len(rows) == 30  # 8 B .. 4 GiB, doubling
    assert len(re.findall(rf"nranks {ranks} .*- Init COMPLETE$", text, re.M)) in (1, ranks)
    busbws = []
    for size, count, *runs in rows:
        assert int(size) == 4 * int(count)  # float
        for time_us, algbw, busbw in (runs[0:3], runs[3:6]):
            assert float(algbw) == pytest.approx(int(size) / float(time_us) / 1e3, abs=0.006)
            assert float(busbw) == pytest.approx(float(algbw) * 2 * (ranks - 1) / ranks, abs=0.02)
            busbws.append(float(busbw))
    average = float(re.search(r"^# Avg bus bandwidth +: ([\d.]+)", text, re.M).group(1))  # type: ignore[union-attr]
    assert average == pytest.approx(sum(busbws) / len(busbws), abs=0.01)
    assert peak_bus_bandwidth(text) == max(busbws)
    assert nccl_evidence(text).network == ("Socket" if sample == FALLBACK_SAMPLE else "IB")


VERDICT_SCRIPT = ROOT / "components" / "k8s" / "jobs" / "files" / "fabric_verdict.sh"


@pytest.mark.parametrize(
    ("sample", "code", "says"),
    [
        (PASS_SAMPLE, 0, "fabric check: 4 ranks on 4 workers, each through its own device"),
        (PARTIAL_SAMPLE, 1, "fabric check: 3 rank(s) on 3 worker(s) ran, this job has 4 on 4"),
        (FALLBACK_SAMPLE, 1, "but this job asks for roce: a fallback"),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else None,
)
def test_the_launchers_own_verdict_agrees_with_verify_on_the_samples(sample: Path, code: int, says: str) -> None:
    """The launcher judges coverage too (components/k8s/jobs/files/fabric_verdict.sh WORKERS RANKS:
    the dev stack's 4 workers x 1 GPU), so a partial run fails the MPIJob itself."""
    result = subprocess.run(
        ["sh", str(VERDICT_SCRIPT), "roce", "100", "0.8", str(sample), "4", "4"], capture_output=True, text=True
    )
    assert result.returncode == code, result.stdout + result.stderr
    assert says in result.stdout


def test_the_launchers_verdict_names_a_worker_whose_nic_is_missing(tmp_path: Path) -> None:
    log = tmp_path / "launcher.log"
    log.write_text(
        "\n".join(
            line
            for line in PASS_SAMPLE.read_text().splitlines()
            if not ("worker-2:" in line and "NET/IB : Using" in line) and not line.startswith("fabric check:")
        )
    )
    result = subprocess.run(
        ["sh", str(VERDICT_SCRIPT), "roce", "100", "0.8", str(log), "4", "4"], capture_output=True, text=True
    )
    assert result.returncode == 1
    assert (
        "fabric check: no NET/IB device line from nccl-fabric-check-roce-worker-2: its NIC carried nothing"
        in result.stdout
    )
    assert verify("dev", "--log", str(log)).returncode == 1
