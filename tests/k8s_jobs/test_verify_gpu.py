"""GPU health per node (stacks/tools/verify/gpu.py) on realistic Node objects and dcgm-exporter
metrics in the format its render code writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stacks.tools.verify.gpu import judge_node, parse_metrics

FIXTURES = Path(__file__).parent / "fixtures"


def node(name: str, capacity: str, allocatable: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "capacity": {"cpu": "4", "nvidia.com/gpu": capacity},
            "allocatable": {"cpu": "4", "nvidia.com/gpu": allocatable},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def metrics(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_parses_the_exporters_labels() -> None:
    samples = parse_metrics(metrics("dcgm_metrics_healthy.txt"))
    [xid] = [s for s in samples if s.name == "DCGM_FI_DEV_XID_ERRORS"]
    assert xid.value == 0
    assert (xid.labels["gpu"], xid.labels["Hostname"], xid.labels["modelName"]) == ("0", "worker-1", "GRID T4-16C")
    [fb] = [s for s in samples if s.name == "DCGM_FI_DEV_FB_USED"]
    assert fb.labels["pod"] == "nccl-fabric-check-roce-worker-0"


def test_a_healthy_node_passes() -> None:
    health = judge_node(node("worker-1", "1", "1"), metrics("dcgm_metrics_healthy.txt"))
    assert health.healthy, health.render()
    assert "nvidia.com/gpu: 1 allocatable of 1" in health.render()
    assert "GPU 0 (GRID T4-16C): 61 C" in health.render()


def test_an_unhealthy_device_lowers_allocatable_and_fails() -> None:
    health = judge_node(node("worker-2", "2", "1"), metrics("dcgm_metrics_healthy.txt").replace("worker-1", "worker-2"))
    assert not health.healthy
    assert "1 GPU(s) unhealthy: the device plugin lowered allocatable below capacity" in health.render()


def test_an_xid_and_a_hot_gpu_fail_with_the_newer_hostname_label() -> None:
    health = judge_node(node("worker-1", "1", "1"), metrics("dcgm_metrics_xid79_hot.txt"))
    rendered = health.render()
    assert rendered.startswith("FAIL GPU health worker-1")
    assert "GPU 0 (GRID T4-16C): XID 79" in rendered
    assert "GPU 0 (GRID T4-16C): 91 C, above 85 C" in rendered
    assert "NODE_NAME" not in rendered  # `hostname` (after dcgm-exporter#655) is read like `Hostname`


def test_a_node_without_exporter_metrics_or_gpus_fails() -> None:
    health = judge_node(node("worker-3", "0", "0"), None)
    assert "no nvidia.com/gpu in capacity" in health.render()
    assert "no dcgm-exporter metrics from this node" in health.render()
