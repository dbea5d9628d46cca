"""`python -m stacks verify STACK --availability`: does a running GPU pod survive a device-plugin
restart and a kubelet restart on its node, and does the node recover? (The LG CNS PoC's
availability table; docs/availability.md.)

1. Start a probe pod holding one GPU (availability_objects.probe_pod) and wait until it runs;
   remember its uid and restart count and the node's `nvidia.com/gpu` capacity.
2. Delete the device-plugin pod on that node. The DaemonSet controller creates a replacement at
   once under a new name; wait until it runs and allocatable is back at capacity.
3. `ssh USER@<management IP> sudo systemctl restart kubelet`. Wait until the new kubelet has
   reported (the Ready condition's `lastHeartbeatTime` changed: the first status sync after a
   kubelet start always patches the node), the node is Ready and allocatable is back at the
   capacity seen in step 1. Both capacity and allocatable drop to 0 on the way: the device
   manager restores its checkpoint with an empty device list "so that the resource capacity will
   stay zero till the corresponding device plugin re-registers" (kubernetes
   pkg/kubelet/cm/devicemanager/manager.go `readCheckpoint`), which is why "allocatable equals
   capacity" alone would pass too early.
4. After each step the probe must still run with the same uid and restart count: a GPU container
   that was restarted or replaced is exactly what the check is there to catch.
5. Always delete the probe.

Each wait ends after `timeout_s`; time and sleep are parameters so tests need not wait.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stacks.environment.model import Environment
from stacks.kubectl import Kubectl, VerifyError
from stacks.tools.verify.availability.objects import (
    PROBE_NAME,
    describe_node,
    describe_pod,
    device_plugin_pods,
    gpus,
    pod_running,
    probe_pod,
    ready_condition,
    restarts,
)
from stacks.tools.verify.logs import Verdict

__all__ = ["PROBE_NAME", "Failed", "run_availability"]

SSH_TIMEOUT_S = 120
RESTART_KUBELET = ["sudo", "systemctl", "restart", "kubelet"]


# A portable POSIX user name: characters of the portable filename character set, not starting with
# a hyphen (POSIX.1-2017 3.437 "User Name", 3.282 "Portable Filename Character Set"), at most 32
# characters (the Linux/shadow-utils limit). Anything else is not a user of the node, and one
# starting with "-" would be read by ssh as an option (`-oProxyCommand=...` runs a local command).
SSH_USER_PATTERN = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,31}")


def ssh_user_problem(user: str) -> str | None:
    """Why `user` cannot be the `--ssh-user` (None: it can)."""
    if SSH_USER_PATTERN.fullmatch(user):
        return None
    return (
        f"--ssh-user {user!r}: not a user name; give the nodes' login user (letters, digits, '.', '_', '-', "
        "not starting with '-', at most 32 characters), e.g. --ssh-user rocky"
    )


class Failed(Exception):
    """The check failed; the message is the verdict's last line."""


@dataclass
class Waiter:
    timeout_s: float
    poll_s: float
    sleep: Callable[[float], None]
    clock: Callable[[], float]

    def until(self, what: str, look: Callable[[], tuple[bool, str]]) -> str:
        """Call `look` until it says done; its text is what was seen last."""
        deadline = self.clock() + self.timeout_s
        while True:
            done, seen = look()
            if done:
                return seen
            if self.clock() >= deadline:
                raise Failed(f"{what}: not within {self.timeout_s / 60:g} min (last seen: {seen})")
            self.sleep(self.poll_s)


def get_pod(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any] | None:
    result = kubectl.run("get", "pod", name, "--output", "json", namespace=namespace)
    if result.returncode != 0:
        if "NotFound" in result.stderr:
            return None
        raise VerifyError(f"kubectl get pod {name}: {result.stderr.strip()}")
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def ssh_restart_kubelet(user: str, address: str) -> None:
    binary = shutil.which("ssh")
    if binary is None:
        raise VerifyError("ssh is not on PATH: install the OpenSSH client")
    problem = ssh_user_problem(user)
    if problem is not None:
        raise VerifyError(problem)
    # BatchMode: fail instead of prompting for a password or a host key nobody is there to accept.
    # `--` ends ssh's options (it parses them with getopt): the destination is never one.
    command = [binary, "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "--", f"{user}@{address}", *RESTART_KUBELET]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=SSH_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise Failed(f"ssh {user}@{address}: no answer within {SSH_TIMEOUT_S} s") from error
    if result.returncode != 0:
        raise Failed(f"ssh {user}@{address} {' '.join(RESTART_KUBELET)}: {result.stderr.strip()}")


class Run:
    """One availability check; state shared by its steps."""

    def __init__(self, kubectl: Kubectl, env: Environment, waiter: Waiter, verdict: Verdict) -> None:
        self.kubectl, self.env, self.waiter, self.verdict = kubectl, env, waiter, verdict
        self.namespace = env.jobs.namespace
        self.uid = ""
        self.restarts = 0
        self.node = ""
        self.capacity = 0

    def node_object(self) -> dict[str, Any]:
        return self.kubectl.json("get", "node", self.node)

    def start_probe(self, node: str | None) -> None:
        result = self.kubectl.run("create", "-f", "-", stdin=json.dumps(probe_pod(self.env, node)))
        if result.returncode != 0:
            hint = (
                f"; a previous run left it: kubectl delete pod {PROBE_NAME} -n {self.namespace}"
                if "AlreadyExists" in result.stderr
                else ""
            )
            raise Failed(f"could not create the probe pod: {result.stderr.strip()}{hint}")

        def look() -> tuple[bool, str]:
            pod = get_pod(self.kubectl, self.namespace, PROBE_NAME)
            if pod is None:
                return False, "no pod"
            return pod_running(pod), describe_pod(pod) + (
                f" on {pod['spec']['nodeName']}" if pod["spec"].get("nodeName") else ", not scheduled (a free GPU?)"
            )

        self.waiter.until(f"probe pod {PROBE_NAME} to run", look)
        pod = get_pod(self.kubectl, self.namespace, PROBE_NAME)
        assert pod is not None
        self.uid, self.restarts, self.node = pod["metadata"]["uid"], restarts(pod), pod["spec"]["nodeName"]
        node_object = self.node_object()
        self.capacity = gpus(node_object, "capacity")
        self.verdict.lines.append(
            f"probe {PROBE_NAME} on {self.node}: running, {self.restarts} restarts; node {describe_node(node_object)}"
        )

    def check_probe(self, after: str) -> None:
        pod = get_pod(self.kubectl, self.namespace, PROBE_NAME)
        if pod is None:
            raise Failed(f"after the {after}: probe pod is gone")
        if pod["metadata"]["uid"] != self.uid:
            raise Failed(f"after the {after}: probe pod was replaced (new uid)")
        if restarts(pod) != self.restarts:
            raise Failed(f"after the {after}: probe restarted (restartCount {self.restarts} -> {restarts(pod)})")
        if not pod_running(pod):
            raise Failed(f"after the {after}: probe is {describe_pod(pod)}")
        self.verdict.lines.append(f"after the {after}: probe still running: same uid, {self.restarts} restarts")

    def restart_device_plugin(self) -> None:
        plugin = device_plugin_pods(self.env)
        on_node = f"spec.nodeName={self.node}"

        def plugin_pods() -> list[dict[str, Any]]:
            return self.kubectl.items(
                "get", "pods", "--selector", plugin.selector, "--field-selector", on_node, namespace=plugin.namespace
            )

        running = [p for p in plugin_pods() if pod_running(p)]
        if not running:
            raise Failed(f"no running device-plugin pod ({plugin.selector} in {plugin.namespace}) on {self.node}")
        old = running[0]["metadata"]["name"]
        # kubectl waits until the pod is gone (--wait defaults to true).
        result = self.kubectl.run("delete", "pod", old, namespace=plugin.namespace)
        if result.returncode != 0:
            raise Failed(f"kubectl delete pod {old} -n {plugin.namespace}: {result.stderr.strip()}")

        def replaced() -> tuple[bool, str]:
            new = [p for p in plugin_pods() if p["metadata"]["name"] != old]
            if not new:
                return False, "no replacement pod yet"
            return pod_running(new[0]), f"{new[0]['metadata']['name']} {describe_pod(new[0])}"

        seen = self.waiter.until(f"the DaemonSet's new device-plugin pod on {self.node} to run", replaced)
        self.verdict.lines.append(f"device plugin: pod {old} deleted; {seen}")
        self.waiter.until(f"{self.node}'s GPUs after the device-plugin restart", self.gpus_back)
        self.check_probe("device-plugin restart")

    def gpus_back(self) -> tuple[bool, str]:
        node = self.node_object()
        return gpus(node, "allocatable") == self.capacity, describe_node(node)

    def restart_kubelet(self, ssh_user: str) -> None:
        address = next((str(n.management_ip) for n in self.env.gpu_workers.nodes if n.name == self.node), None)
        if address is None:
            raise Failed(f"{self.node} is not a GPU worker of this stack (gpuWorkers.nodes): pass --node")
        before = ready_condition(self.node_object()).get("lastHeartbeatTime")
        ssh_restart_kubelet(ssh_user, address)
        went_not_ready = False
        lowest = self.capacity

        def recovered() -> tuple[bool, str]:
            nonlocal went_not_ready, lowest
            node = self.node_object()
            ready = ready_condition(node)
            went_not_ready |= ready.get("status") != "True"
            lowest = min(lowest, gpus(node, "allocatable"))
            reported = ready.get("lastHeartbeatTime") != before
            back = ready.get("status") == "True" and gpus(node, "allocatable") == self.capacity
            return reported and back, describe_node(node) + ("" if reported else ", the new kubelet has not reported")

        self.waiter.until(f"{self.node} after the kubelet restart", recovered)
        self.verdict.lines.append(
            "kubelet: restarted; "
            + ("node went NotReady and came back Ready" if went_not_ready else "node stayed Ready")
            + f"; nvidia.com/gpu allocatable went to {lowest} and came back to {self.capacity}"
        )
        self.check_probe("kubelet restart")

    def delete_probe(self) -> None:
        result = self.kubectl.run("delete", "pod", PROBE_NAME, "--ignore-not-found", "--wait=false")
        if result.returncode != 0:
            self.verdict.fail(
                f"could not delete the probe: {result.stderr.strip()}; run kubectl delete pod {PROBE_NAME} "
                f"-n {self.namespace}"
            )


def run_availability(
    kubectl: Kubectl,
    env: Environment,
    *,
    node: str | None,
    ssh_user: str,
    timeout_s: float,
    poll_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Verdict:
    """The check on `node` (None: where the scheduler puts the probe). Never raises Failed: a
    failure is the verdict's last line, and the probe is deleted either way. Raises VerifyError
    for an `ssh_user` that is not a user name, before anything is created."""
    problem = ssh_user_problem(ssh_user)
    if problem is not None:
        raise VerifyError(problem)
    verdict = Verdict(f"availability ({node or 'node picked by the scheduler'})")
    run = Run(kubectl, env, Waiter(timeout_s, poll_s, sleep, clock), verdict)
    try:
        run.start_probe(node)
        run.restart_device_plugin()
        run.restart_kubelet(ssh_user)
    except Failed as failure:
        verdict.fail(str(failure))
    finally:
        run.delete_probe()
    return verdict
