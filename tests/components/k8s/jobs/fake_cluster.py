"""The world the fake `kubectl` and `ssh` (fake_cluster_bin.py) answer from: the dev stack's
cluster (four GPU workers `worker-1`..`worker-4`, one T4 vGPU each) with its device plugin and
dcgm-exporter pods as their DaemonSets create them, and helpers to put the fakes on PATH."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
FAKE = Path(__file__).parent / "fake_cluster_bin.py"
DEV_WORKERS = {"worker-1": "10.10.0.51", "worker-2": "10.10.0.52", "worker-3": "10.10.0.53", "worker-4": "10.10.0.54"}
EXPORTER_LABELS = {
    "app.kubernetes.io/name": "dcgm-exporter",
    "app.kubernetes.io/component": "gpu-metrics",
    "app.kubernetes.io/part-of": "gpucluster",
}
PLUGIN_LABELS = {
    "app.kubernetes.io/name": "nvidia-device-plugin",
    "app.kubernetes.io/component": "gpu-device-plugin",
    "app.kubernetes.io/part-of": "gpucluster",
}


def node(name: str, *, gpus: str = "1", allocatable: str | None = None, ready: str = "True") -> dict[str, Any]:
    """A GPU worker's Node as the kubelet reports it (capacity counts every device the plugin
    registered, allocatable only the healthy ones)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true"}},
        "status": {
            "capacity": {"cpu": "4", "memory": "24Gi", "nvidia.com/gpu": gpus},
            "allocatable": {"cpu": "4", "memory": "23Gi", "nvidia.com/gpu": allocatable or gpus},
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "KubeletReady" if ready == "True" else "KubeletNotReady",
                    "lastHeartbeatTime": "2026-03-01T10:00:00Z",
                },
            ],
        },
    }


def daemon_pod(
    daemonset: str, namespace: str, labels: dict[str, str], node_name: str, *, phase: str = "Running"
) -> dict[str, Any]:
    """A DaemonSet's pod on one node; a Pending one has no IP yet and a waiting container."""
    running = phase == "Running"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{daemonset}-{node_name[-1]}x{len(namespace)}q",
            "namespace": namespace,
            "labels": labels,
            "uid": f"uid-{daemonset}-{node_name}",
            "ownerReferences": [{"kind": "DaemonSet", "name": daemonset, "controller": True}],
        },
        "spec": {"nodeName": node_name, "containers": [{"name": "main"}]},
        "status": {
            "phase": phase,
            **({"podIP": f"10.244.{node_name[-1]}.7"} if running else {}),
            "containerStatuses": [
                {
                    "name": "main",
                    "restartCount": 0,
                    "ready": running,
                    "state": {"running": {}} if running else {"waiting": {"reason": "ContainerCreating"}},
                }
            ],
        },
    }


def metrics_for(node_name: str, fixture: str = "dcgm_metrics_healthy.txt") -> str:
    """A fixture as the exporter on `node_name` renders it (its host label is the node name)."""
    return (FIXTURES / fixture).read_text().replace('Hostname="worker-1"', f'Hostname="{node_name}"')


def gpu_world(
    *,
    nodes: list[dict[str, Any]] | None = None,
    exporter_namespace: str = "gpu-monitoring",
    exporter_labels: dict[str, str] | None = None,
    exporter_phase: dict[str, str] | None = None,
    metrics: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Nodes, device-plugin and exporter pods, and each exporter's metrics (node name -> fixture)."""
    nodes = nodes if nodes is not None else [node(name) for name in DEV_WORKERS]
    pods = []
    texts = {}
    for item in nodes:
        name = item["metadata"]["name"]
        pods.append(daemon_pod("nvidia-device-plugin", "nvidia-device-plugin", PLUGIN_LABELS, name))
        exporter = daemon_pod(
            "dcgm-exporter",
            exporter_namespace,
            exporter_labels or EXPORTER_LABELS,
            name,
            phase=(exporter_phase or {}).get(name, "Running"),
        )
        pods.append(exporter)
        fixture = (metrics or {}).get(name, "dcgm_metrics_healthy.txt")
        texts[f"{exporter_namespace}/{exporter['metadata']['name']}"] = metrics_for(name, fixture)
    pods += control_plane_pods()
    return {"nodes": nodes, "pods": pods, "metrics": texts, "mpijobs": {}, "logs": {}, "etcd": etcd_secrets()}


def control_plane_pods(
    *, flags: dict[str, str] | None = None, nodes: tuple[str, ...] = ("master",)
) -> list[dict[str, Any]]:
    """kubeadm's kube-apiserver and etcd static pods (their mirror pods) on the control-plane nodes;
    the API server with the stack's hardening flags unless `flags` says otherwise."""
    from stacks.tools.verify.hardening import expected_flags

    flags = expected_flags() if flags is None else flags
    pods = []
    for name in nodes:
        for component, command in (
            (
                "kube-apiserver",
                ["kube-apiserver", "--advertise-address=10.10.0.11", *(f"{k}={v}" for k, v in flags.items())],
            ),
            ("etcd", ["etcd", "--client-cert-auth=true"]),
        ):
            pods.append(
                {
                    "metadata": {
                        "name": f"{component}-{name}",
                        "namespace": "kube-system",
                        "labels": {"component": component, "tier": "control-plane"},
                    },
                    "spec": {"nodeName": name, "containers": [{"name": component, "command": command}]},
                    "status": {"phase": "Running"},
                }
            )
    return pods


def etcd_secrets(**values: bytes) -> dict[str, Any]:
    """`etcdctl get /registry/secrets/ --prefix -w json` over `namespace/name` -> stored value;
    by default two Secrets under secretbox."""
    import base64

    values = values or {
        "kube-system/bootstrap-token-abcdef": b"k8s:enc:secretbox:v1:key-1:" + bytes(range(40)),
        "training/launcher-ssh": b"k8s:enc:secretbox:v1:key-1:" + bytes(range(40, 90)),
    }
    kvs = [
        {"key": base64.b64encode(f"/registry/secrets/{k}".encode()).decode(), "value": base64.b64encode(v).decode()}
        for k, v in values.items()
    ]
    return {"header": {"revision": 7}, "kvs": kvs, "count": len(kvs)}


def install(tmp_path: Path, world: dict[str, Any]) -> dict[str, str]:
    """Write the world and the `kubectl` and `ssh` wrappers; the environment that puts them on
    PATH with a kubeconfig."""
    world_file = tmp_path / "world.json"
    world_file.write_text(json.dumps(world))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("kubectl", "ssh"):
        wrapper = bin_dir / tool
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "{world_file}" {tool} "$@"\n')
        wrapper.chmod(0o755)
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    return {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "KUBECONFIG": str(tmp_path / "kubeconfig")}


def read_world(tmp_path: Path) -> dict[str, Any]:
    world: dict[str, Any] = json.loads((tmp_path / "world.json").read_text())
    return world
