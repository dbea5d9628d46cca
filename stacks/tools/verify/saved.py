"""`python -m stacks verify STACK --log FILE`: the verdict on a saved launcher log, no cluster.

The same judges as the live path (jobs.py `judge`, logs.py); what only the cluster knows
is taken from the log or said to be unknown:
- which job wrote it: nccl-tests output is the fabric check, a `total images/sec:` line (or our
  PyTorch script's banner) a benchmark; a log with neither is judged as the job the stack runs
  first (the fabric check when enabled), so a cut-off log fails on what it lacks;
- whether the MPIJob succeeded: the fabric check's launcher prints its own verdict last
  (components/k8s/jobs/files/fabric_verdict.sh, `fabric check: PASS|FAIL`) and exits with it; a
  benchmark log carries no such line, so its state is "unknown" and only the log is judged;
- how many GPUs ran: the stack's own count (workers x slots), as `verify` assumes for a missing
  MPIJob spec.
"""

from __future__ import annotations

import re
from pathlib import Path

from stacks.environment.model import Environment
from stacks.kubectl import VerifyError
from stacks.tools.verify.jobs import ExpectedJob, expected_jobs, job_of_kind, judge
from stacks.tools.verify.logs import Verdict

_NCCL_TESTS = re.compile(r"^# (?:Collective test starting: \w+|nThread \d+ nGpus \d+ minBytes)", re.MULTILINE)
_BENCHMARK = re.compile(r"^(?:total images/sec: |ddp_resnet50: \d+ ranks)", re.MULTILINE)
_FABRIC_VERDICT = re.compile(r"^fabric check: (PASS|FAIL)$", re.MULTILINE)


def read_log(path: Path) -> str:
    try:
        # errors="replace": a log cut mid-character (a truncated `kubectl logs`) is still judged.
        return path.read_text(errors="replace")
    except FileNotFoundError:
        raise VerifyError(f"--log {path}: no such file (save one with `kubectl logs POD > {path}`)") from None
    except IsADirectoryError:
        raise VerifyError(f"--log {path}: is a folder, not a log file") from None
    except OSError as error:
        raise VerifyError(f"--log {path}: cannot be read: {error.strerror}") from None


def job_of_log(env: Environment, log: str) -> tuple[ExpectedJob, str]:
    """Which of the stack's jobs wrote this log, and how that was decided."""
    if _NCCL_TESTS.search(log):
        return job_of_kind(env, "fabric-check"), "nccl-tests output"
    if _BENCHMARK.search(log):
        return job_of_kind(env, "benchmark"), "benchmark output"
    enabled = expected_jobs(env)
    job = enabled[0] if enabled else job_of_kind(env, "fabric-check")
    return job, f"neither nccl-tests nor benchmark output; judged as {job.name}"


def verify_saved_log(env: Environment, path: Path) -> Verdict:
    log = read_log(path)
    job, why = job_of_log(env, log)
    verdict = Verdict(job.name)
    verdict.lines.append(f"log: {path} ({why})")
    ended = _FABRIC_VERDICT.findall(log) if job.kind == "fabric-check" else []
    if ended:
        verdict.lines.append(f"state: the launcher's own verdict: {ended[-1]}")
    else:
        verdict.lines.append("state: unknown (a saved log does not say how the MPIJob ended); judged on the log alone")
    judge(env, job, log, gpus=job.gpus, succeeded=not ended or ended[-1] == "PASS", verdict=verdict)
    return verdict
