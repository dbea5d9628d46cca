"""`python -m stacks verify STACK`: did the stack's training jobs prove the fabric, and are its
GPUs healthy?

Reads each enabled job's MPIJob status and its launcher's log with `kubectl` and prints, per job,
the transport NCCL actually used, bus bandwidth against the link rate or images/sec per GPU
against a published reference, and PASS/FAIL; then, per GPU worker, its GPU health (devices the
device plugin reports unhealthy, XID errors and temperature from the dcgm-exporter:
gpu_nodes.py), and the API server's hardening on every control-plane node and on the Secrets in
etcd (hardening.py; bootstrap mode only). Exit 0 when everything passed, 1 when a job or a node failed, 2 on a usage
problem (no kubeconfig, no kubectl, an invalid stack file, an unreadable --log), always without a traceback. The
kubeconfig is found as stacks/kubectl.py says. `--availability` runs the disruptive availability
check instead (stacks/tools/verify/availability/, guarded by its command.py).

`--log FILE` judges a saved launcher log (`kubectl logs ... > FILE`) by the same rules, without a
cluster (saved.py). Which jobs the stack runs and how a log is judged live in jobs.py, shared by both.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stacks.environment.loader import load_environment, read_stack_file
from stacks.environment.model import Environment
from stacks.environment.stack_file import stack_file_path
from stacks.kubectl import Kubectl, VerifyError, kubeconfig_for
from stacks.tools.command_help import command_parser
from stacks.tools.verify.availability import command as availability_cli
from stacks.tools.verify.gpu import NodeHealth
from stacks.tools.verify.gpu_nodes import gpu_health
from stacks.tools.verify.hardening import hardening_verdicts
from stacks.tools.verify.jobs import ExpectedJob, expected_jobs, judge
from stacks.tools.verify.launcher import LogSource, launcher_selector, log_source, newest_pod
from stacks.tools.verify.logs import Verdict
from stacks.tools.verify.saved import verify_saved_log

EXIT_FAILED = 1
EXIT_USAGE = 2


def mpijob_of(kubectl: Kubectl, name: str) -> dict[str, Any] | None:
    result = kubectl.run("get", "mpijob", name, "--output", "json")
    if result.returncode != 0:
        if "NotFound" in result.stderr:
            return None
        raise VerifyError(f"kubectl get mpijob {name}: {result.stderr.strip()}")
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def launcher_log(kubectl: Kubectl, name: str) -> tuple[LogSource | None, str]:
    """The newest launcher pod's newest finished run, and its log (launcher.py says why not
    `kubectl logs job/<name>-launcher`). (None, "") when no launcher pod is left."""
    pod = newest_pod(kubectl.items("get", "pods", "--selector", launcher_selector(name)))
    if pod is None:
        return None, ""
    source = log_source(pod)
    args = ["logs", source.pod, "--container", source.container, "--tail=-1"]
    if source.previous:
        args.append("--previous")
    logs = kubectl.run(*args)
    return source, logs.stdout if logs.returncode == 0 else ""


def job_state(mpijob: dict[str, Any]) -> str:
    """The latest of Succeeded, Failed, Running, Created that is True."""
    conditions = mpijob.get("status", {}).get("conditions", [])
    true = [c["type"] for c in conditions if c.get("status") == "True"]
    for state in ("Succeeded", "Failed", "Running", "Suspended", "Created"):
        if state in true:
            return state
    return "Pending"


def gpus_of(mpijob: dict[str, Any], fallback: int) -> int:
    spec = mpijob.get("spec", {})
    workers = spec.get("mpiReplicaSpecs", {}).get("Worker", {}).get("replicas")
    slots = spec.get("slotsPerWorker", 1)
    return int(workers) * int(slots) if workers else fallback


def verify_job(kubectl: Kubectl, env: Environment, job: ExpectedJob) -> Verdict:
    verdict = Verdict(job.name)
    mpijob = mpijob_of(kubectl, job.name)
    if mpijob is None:
        verdict.fail(f"no MPIJob {job.name} in namespace {env.jobs.namespace}: has `pulumi up` run with it enabled?")
        return verdict
    state = job_state(mpijob)
    verdict.lines.append(f"state: {state}")
    if state not in ("Succeeded", "Failed"):
        verdict.fail("not finished yet: run verify again when it has (kubectl get mpijob -w)")
        return verdict
    source, log = launcher_log(kubectl, job.name)
    if source is None:
        verdict.lines.append(
            f"log: no launcher pod of {job.name} is left (deleted by the runPolicy's cleanPodPolicy or ttl?)"
        )
    else:
        verdict.lines.append(source.describe())
    judge(env, job, log, gpus=gpus_of(mpijob, job.gpus), succeeded=state == "Succeeded", verdict=verdict)
    return verdict


def report(verdicts: list[Verdict], health: Sequence[NodeHealth] = ()) -> int:
    """Print every job's verdict, every GPU node's health and the overall verdict; the exit status."""
    for verdict in verdicts:
        print(verdict.render())
    for node in health:
        print(node.render())
    failed = [v.job for v in verdicts if not v.passed] + [f"GPU health {n.node}" for n in health if not n.healthy]
    print(f"verdict: FAIL ({', '.join(failed)})" if failed else "verdict: PASS")
    return EXIT_FAILED if failed else 0


def cmd_verify(args: argparse.Namespace) -> int:
    env = load_environment(read_stack_file(stack_file_path(args.stack, args.file)))
    refused = availability_cli.refusal(args, env)
    if refused is None and args.log and args.availability:
        refused = "--log judges a saved log; --availability disrupts a live cluster: give one of them"
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return EXIT_USAGE
    if args.log:
        try:
            return report([verify_saved_log(env, Path(args.log))])
        except VerifyError as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_USAGE
    if args.availability:
        return availability_cli.cmd_availability(args, env)
    jobs = expected_jobs(env)
    if not jobs:
        print(f"stack {args.stack!r} enables no training job (jobs.sample.enabled, jobs.fabricCheck.enabled)")
    try:
        with kubeconfig_for(args.stack, args.kubeconfig) as kubeconfig:
            kubectl = Kubectl(kubeconfig, env.jobs.namespace)
            verdicts = [verify_job(kubectl, env, job) for job in jobs]
            health = gpu_health(kubectl, env)
            # The API server's hardening reached every control-plane node (issue 40 item 3).
            hardening = hardening_verdicts(kubectl) if env.kubernetes.mode == "bootstrap" else []
    except VerifyError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    # A stack with no job still gets its GPU health, and still fails: there is nothing to verify.
    verdicts += hardening
    return report(verdicts, health) if jobs else max(report(verdicts, health), EXIT_FAILED)


def register(commands: Any) -> None:
    verify = command_parser(
        commands,
        "verify",
        summary="read the training jobs' results (transport, bandwidth, throughput) and GPU health per node",
        description=__doc__ or "",
        needs="cluster",
        exit_statuses="0 when every job and node passed; 1 when a job or a node failed (or, with --availability, "
        "the probe pod or its node did not recover); 2 on a usage problem: no kubeconfig, no kubectl, an invalid "
        "stack file, an unreadable --log, a wrong --confirm. With --log it needs no cluster: it reads the file only.",
    )
    verify.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml and the stack's kubeconfig output")
    verify.add_argument("--file", help="read this stack file instead")
    source = verify.add_mutually_exclusive_group()
    source.add_argument("--kubeconfig", help="kubeconfig file (default: the stack output, else KUBECONFIG)")
    source.add_argument(
        "--log",
        metavar="FILE",
        help="judge this saved launcher log instead of reading the cluster (no kubectl needed; "
        "the stack file still says which transport and link rate to expect)",
    )
    availability_cli.add_flags(verify)
    verify.set_defaults(func=cmd_verify)
