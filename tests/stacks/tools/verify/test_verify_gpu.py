"""GPU health per node (stacks/tools/verify/gpu.py) on realistic Node objects and dcgm-exporter
metrics in the format its render code writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stacks.tools.verify.gpu import judge_node, parse_metrics

FIXTURES = Path(__file__).resolve().parents[3] / "components" / "k8s" / "jobs" / "fixtures"  # shared with the jobs tests


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


def test_a_hot_gpu_fails_with_the_newer_hostname_label() -> None:
    health = judge_node(node("worker-1", "1", "1"), metrics("dcgm_metrics_xid79_hot.txt"))
    rendered = health.render()
    assert rendered.startswith("FAIL GPU health worker-1")
    assert "GPU 0 (GRID T4-16C): last XID since the exporter started: XID 79 (GPU has fallen off the bus" in rendered
    assert "problem: GPU 0 (GRID T4-16C): 91 C, above 85 C" in rendered
    assert "NODE_NAME" not in rendered  # `hostname` (after dcgm-exporter#655) is read like `Hostname`


def test_a_node_without_exporter_metrics_or_gpus_fails() -> None:
    health = judge_node(node("worker-3", "0", "0"), None)
    assert "no nvidia.com/gpu in capacity" in health.render()
    assert "no dcgm-exporter metrics from this node" in health.render()


# --- a vGPU guest: what DCGM cannot export there, and XIDs over the exporter's window ------------


def test_a_vgpu_guest_says_which_metrics_it_cannot_export() -> None:
    """DCGM exports no temperature or power in a vGPU guest (dcgm-exporter#236): said, not passed over."""
    health = judge_node(node("worker-1", "1", "1"), metrics("dcgm_metrics_vgpu.txt"))
    rendered = health.render()
    assert health.healthy, rendered
    assert "GPU 0 (GRID T4-16C): temperature not available on vGPU" in rendered
    assert "GPU 0 (GRID T4-16C): power draw not available on vGPU" in rendered


def test_the_last_xid_an_old_program_left_does_not_fail_the_node() -> None:
    """DCGM_FI_DEV_XID_ERRORS keeps the last XID until the exporter restarts; nothing in the window."""
    health = judge_node(node("worker-1", "1", "1"), metrics("dcgm_metrics_vgpu.txt"))
    assert health.healthy, health.render()
    assert "last XID since the exporter started: XID 13 (Graphics Engine Exception" in health.render()


def test_an_xid_within_the_window_fails_named_with_its_meaning() -> None:
    health = judge_node(node("worker-1", "1", "1"), metrics("dcgm_metrics_vgpu_xid79_window.txt"))
    assert not health.healthy
    assert health.problems == [
        "GPU 0 (GRID T4-16C): XID 79 (GPU has fallen off the bus: reboot the host), 1 time(s) in the last 5 min"
    ]
    assert "XID 13 (Graphics Engine Exception" in health.render()  # the program's: a line, not a problem


def test_application_xids_within_the_window_are_reported_not_failed() -> None:
    text = "\n".join(
        line for line in metrics("dcgm_metrics_vgpu_xid79_window.txt").splitlines() if 'xid="79"' not in line
    )
    health = judge_node(node("worker-1", "1", "1"), text)
    assert health.healthy, health.render()
    assert (
        "XID 13 (Graphics Engine Exception (often an out-of-range access by the program)), 2 time(s)" in health.render()
    )


def test_an_xid_the_table_does_not_know_fails_and_points_at_the_catalogue() -> None:
    text = metrics("dcgm_metrics_vgpu_xid79_window.txt").replace('xid="79"', 'xid="154"')
    health = judge_node(node("worker-1", "1", "1"), text)
    assert any("XID 154 (see https://docs.nvidia.com/deploy/xid-errors/)" in p for p in health.problems)
