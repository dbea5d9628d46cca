"""A fake `kubectl` (v1.34) and `ssh` over one JSON world file, for `stacks verify` tests.

Run as `fake_cluster_bin.py WORLD kubectl|ssh ARGS...` (tests/components/k8s/jobs/fake_cluster.py writes the
wrappers). It answers no kinder than the real tools:

- An unknown object is `Error from server (NotFound): <kind> "<name>" not found`, exit 1.
- `get --raw .../pods/P:PORT/proxy/...`: a pod without an IP is refused with "address not
  allowed" (kubernetes pkg/registry/core/pod/strategy.go `ResourceLocation`); a pod with an IP
  whose container is not running answers 503 (the API server cannot dial it).
- Time is the number of kubectl calls (`tick`). Changes happen later, not at once:
  * a created pod is Pending and unscheduled, then scheduled and ContainerCreating, then Running;
  * `delete pod` of a DaemonSet pod returns when it is gone (kubectl waits by default); the
    DaemonSet controller's replacement has a new name and becomes Running a few calls later;
  * `ssh USER@IP sudo systemctl restart kubelet`: for a call the API still shows the old kubelet's
    status; then the node is NotReady ("container runtime status check may not have completed
    yet") with a new heartbeat and nvidia.com/gpu capacity and allocatable 0 (the kubelet's
    device manager restores its checkpoint with an empty device list until the plugin
    re-registers: kubelet pkg/kubelet/cm/devicemanager/manager.go `readCheckpoint`); then Ready;
    then the GPUs return.
"""

from __future__ import annotations

import json
import random
import string
import sys
import uuid
from pathlib import Path
from typing import Any, NoReturn

World = dict[str, Any]
GPU = "nvidia.com/gpu"
DEFAULT_DELAYS = {
    "schedule": 1,  # created -> scheduled, ContainerCreating
    "running": 3,  # created -> Running
    "kubelet_status": 2,  # restart -> the new kubelet's first status (NotReady, GPUs 0)
    "kubelet_ready": 4,  # restart -> Ready
    "gpus_back": 6,  # restart -> the device plugin re-registered
}


def fail(message: str, code: int = 1) -> NoReturn:
    sys.stderr.write(message + "\n")
    sys.exit(code)


def suffix() -> str:
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=5))


def delay(world: World, what: str) -> int:
    return int(world.get("delays", {}).get(what, DEFAULT_DELAYS[what]))


def later(world: World, after: int, op: str, **data: Any) -> None:
    world.setdefault("timeline", []).append({"at": world["tick"] + after, "op": op, **data})


def find_pod(world: World, namespace: str, name: str) -> dict[str, Any] | None:
    return next(
        (p for p in world["pods"] if p["metadata"]["name"] == name and p["metadata"]["namespace"] == namespace), None
    )


def find_node(world: World, name: str) -> dict[str, Any] | None:
    return next((n for n in world["nodes"] if n["metadata"]["name"] == name), None)


def apply(world: World, event: dict[str, Any]) -> None:
    """One scheduled change."""
    op = event["op"]
    if op in ("schedule", "running"):
        pod = find_pod(world, event["namespace"], event["pod"])
        if pod is None:
            return
        status = pod.setdefault("status", {})
        if op == "schedule":
            pod["spec"]["nodeName"] = event["node"]
            status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
            status["containerStatuses"] = [
                {
                    "name": c["name"],
                    "restartCount": 0,
                    "ready": False,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
                for c in pod["spec"]["containers"]
            ]
        else:
            status["phase"] = "Running"
            status["podIP"] = f"10.244.{random.randint(1, 200)}.{random.randint(2, 250)}"
            status["conditions"] = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]
            for container in status["containerStatuses"]:
                container.update(ready=True, state={"running": {"startedAt": "2026-03-01T10:00:00Z"}})
    elif op == "kubelet_status":
        node = find_node(world, event["node"])
        assert node is not None
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        ready.update(
            status="False",
            reason="KubeletNotReady",
            message="container runtime status check may not have completed yet",
            lastHeartbeatTime=f"2026-03-01T11:00:{world['tick'] % 60:02d}Z",
        )
        for key in ("capacity", "allocatable"):
            node["status"][key][GPU] = "0"
        if world.get("probe_restarts_on_kubelet_restart"):
            for pod in world["pods"]:
                if pod["spec"].get("nodeName") == event["node"] and pod["metadata"]["name"] == world.get("probe_name"):
                    pod["status"]["containerStatuses"][0]["restartCount"] += 1
    elif op == "kubelet_ready":
        node = find_node(world, event["node"])
        assert node is not None
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        ready.update(status="True", reason="KubeletReady", message="kubelet is posting ready status")
    elif op == "gpus_back":
        node = find_node(world, event["node"])
        assert node is not None
        for key in ("capacity", "allocatable"):
            node["status"][key][GPU] = event["gpus"]


def advance(world: World) -> None:
    world["tick"] = world.get("tick", 0) + 1
    due = [e for e in world.get("timeline", []) if e["at"] <= world["tick"]]
    world["timeline"] = [e for e in world.get("timeline", []) if e["at"] > world["tick"]]
    for event in due:
        apply(world, event)


def opt(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def selected(pod: dict[str, Any], selector: str | None, field: str | None) -> bool:
    if selector:
        wanted = dict(term.split("=", 1) for term in selector.split(","))
        if not wanted.items() <= pod["metadata"].get("labels", {}).items():
            return False
    if field:
        key, value = field.split("=", 1)
        if key != "spec.nodeName":
            fail(
                f'Error from server (BadRequest): Unable to find "/v1, Resource=pods" that match label selector "", field selector "{field}": field label not supported: {key}'
            )
        return bool(pod["spec"].get("nodeName") == value)
    return True


def run_log(world: World, pod: dict[str, Any], container: str, previous: bool) -> str:
    status = next(s for s in pod["status"]["containerStatuses"] if s["name"] == container)
    if previous and status["restartCount"] == 0:
        fail(f'previous terminated container "{container}" in pod "{pod["metadata"]["name"]}" not found')
    logs: dict[str, dict[str, str]] = world["logs"]
    return logs[pod["metadata"]["name"]]["previous" if previous else "current"]


def kubectl(world: World, args: list[str], stdin: str) -> str:
    namespace = "default"
    while args and args[0] in ("--kubeconfig", "--namespace"):
        if args[0] == "--namespace":
            namespace = args[1]
        args = args[2:]
    world.setdefault("calls", []).append(" ".join(args))
    advance(world)
    if args[:2] == ["get", "mpijob"]:
        job = world["mpijobs"].get(args[2])
        if job is None:
            fail(f'Error from server (NotFound): mpijobs.kubeflow.org "{args[2]}" not found')
        return json.dumps(job)
    if args[:2] == ["get", "pods"]:
        pods = [
            p
            for p in world["pods"]
            if p["metadata"]["namespace"] == namespace
            and selected(p, opt(args, "--selector"), opt(args, "--field-selector"))
        ]
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": pods})
    if args[:2] == ["get", "pod"]:
        pod = find_pod(world, namespace, args[2])
        if pod is None:
            fail(f'Error from server (NotFound): pods "{args[2]}" not found')
        return json.dumps(pod)
    if args[:2] == ["get", "nodes"]:
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": world["nodes"]})
    if args[:2] == ["get", "node"]:
        node = find_node(world, args[2])
        if node is None:
            fail(f'Error from server (NotFound): nodes "{args[2]}" not found')
        return json.dumps(node)
    if args[:2] == ["get", "--raw"]:
        return raw(world, args[2])
    if args[:3] == ["create", "-f", "-"]:
        return create(world, json.loads(stdin), namespace)
    if args[:2] == ["delete", "pod"]:
        return delete(world, args[2], namespace, "--ignore-not-found" in args)
    if args[0] == "exec":
        # `exec POD --container etcd -- etcdctl ... get /registry/secrets/ --prefix`: what etcd holds.
        pod = find_pod(world, namespace, args[1])
        if pod is None:
            fail(f'Error from server (NotFound): pods "{args[1]}" not found')
        command = args[args.index("--") + 1 :]
        if command[0] != "etcdctl" or "/registry/secrets/" not in command or "json" not in command:
            fail("unexpected: kubectl " + " ".join(args))
        return json.dumps(world["etcd"])
    if args[0] == "logs":
        pod = find_pod(world, namespace, args[1])
        if pod is None:
            fail(f'Error from server (NotFound): pods "{args[1]}" not found')
        return run_log(world, pod, opt(args, "--container") or "", "--previous" in args)
    fail("unexpected: kubectl " + " ".join(args))


def raw(world: World, path: str) -> str:
    # /api/v1/namespaces/NS/pods/POD:PORT/proxy/metrics
    parts = path.strip("/").split("/")
    if parts[:3] != ["api", "v1", "namespaces"] or parts[4] != "pods" or parts[6] != "proxy":
        fail(f"unexpected: kubectl get --raw {path}")
    name = parts[5].split(":")[0]
    pod = find_pod(world, parts[3], name)
    if pod is None:
        fail(f'Error from server (NotFound): pods "{name}" not found')
    ip = pod.get("status", {}).get("podIP")
    if not ip:
        fail("Error from server (BadRequest): address not allowed")
    running = all("running" in s.get("state", {}) for s in pod["status"].get("containerStatuses", []))
    if pod["status"].get("phase") != "Running" or not running:
        fail(
            f"Error from server (ServiceUnavailable): error trying to reach service: dial tcp {ip}:9400: connect: connection refused"
        )
    metrics: dict[str, str] = world["metrics"]
    return metrics[f"{parts[3]}/{name}"]


def create(world: World, pod: dict[str, Any], namespace: str) -> str:
    name = pod["metadata"]["name"]
    if pod.get("kind") != "Pod":
        fail(f"unexpected kind {pod.get('kind')}")
    if find_pod(world, namespace, name) is not None:
        fail(f'Error from server (AlreadyExists): error when creating "STDIN": pods "{name}" already exists')
    world.setdefault("created", []).append(json.loads(json.dumps(pod)))
    pod["metadata"].update(namespace=namespace, uid=str(uuid.uuid4()))
    pod["status"] = {"phase": "Pending"}
    world["pods"].append(pod)
    wanted = pod["spec"].get("nodeSelector", {}).get("kubernetes.io/hostname")
    fits = [
        n["metadata"]["name"]
        for n in world["nodes"]
        if int(n["status"]["allocatable"].get(GPU, "0")) > 0 and wanted in (None, n["metadata"]["name"])
    ]
    if fits:
        later(world, delay(world, "schedule"), "schedule", namespace=namespace, pod=name, node=fits[0])
        later(world, delay(world, "running"), "running", namespace=namespace, pod=name)
    return f"pod/{name} created\n"


def delete(world: World, name: str, namespace: str, ignore_missing: bool) -> str:
    pod = find_pod(world, namespace, name)
    if pod is None:
        if ignore_missing:
            return ""
        fail(f'Error from server (NotFound): pods "{name}" not found')
    world["pods"].remove(pod)
    owner = next((o for o in pod["metadata"].get("ownerReferences", []) if o["kind"] == "DaemonSet"), None)
    if owner is not None:
        # The DaemonSet controller replaces it at once, under a new name.
        replacement = json.loads(json.dumps(pod))
        replacement["metadata"].update(name=f"{owner['name']}-{suffix()}", uid=str(uuid.uuid4()))
        node = replacement["spec"].pop("nodeName")
        replacement["status"] = {"phase": "Pending"}
        world["pods"].append(replacement)
        new = replacement["metadata"]["name"]
        later(world, delay(world, "schedule"), "schedule", namespace=namespace, pod=new, node=node)
        later(world, delay(world, "running"), "running", namespace=namespace, pod=new)
    return f'pod "{name}" deleted from {namespace} namespace\n'


def ssh(world: World, args: list[str]) -> str:
    world.setdefault("ssh_argv", []).append(list(args))
    # OpenSSH parses its options with getopt: `-o VALUE` pairs, then `--` ends the options. A
    # destination that starts with "-" before any `--` is read as an option, as ssh would.
    while args and args[0] == "-o":
        args = args[2:]
    if args and args[0] == "--":
        args = args[1:]
    elif args and args[0].startswith("-"):
        fail(f"ssh: unknown option -- {args[0][1:2]}", 255)
    target, command = args[0], " ".join(args[1:])
    user, _, host = target.rpartition("@")
    node = world.get("ssh", {}).get(host)
    if node is None:
        fail(f"ssh: connect to host {host} port 22: No route to host", 255)
    if user != world["ssh_user"]:
        fail(f"{target}: Permission denied (publickey,gssapi-keyex,gssapi-with-mic).", 255)
    world.setdefault("ssh_calls", []).append(f"{target} {command}")
    if command != "sudo systemctl restart kubelet":
        fail(f"unexpected: ssh {target} {command}")
    if world.get("kubelet_fails"):
        fail("Job for kubelet.service failed because the control process exited with error code.")
    found = find_node(world, node)
    assert found is not None
    gpus = found["status"]["capacity"][GPU]
    later(world, delay(world, "kubelet_status"), "kubelet_status", node=node)
    later(world, delay(world, "kubelet_ready"), "kubelet_ready", node=node)
    later(world, delay(world, "gpus_back"), "gpus_back", node=node, gpus=gpus)
    return ""


def main() -> None:
    path, tool, args = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    world = json.loads(path.read_text())
    stdin = sys.stdin.read() if tool == "kubectl" and args[-3:] == ["create", "-f", "-"] else ""
    try:
        out = kubectl(world, args, stdin) if tool == "kubectl" else ssh(world, args)
    finally:
        path.write_text(json.dumps(world))
    sys.stdout.write(out)


if __name__ == "__main__":
    main()
