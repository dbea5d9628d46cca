"""GPU health per node for `stacks verify`: pure functions over what `kubectl` returns.

- Unhealthy devices: NVIDIA's device plugin marks a GPU unhealthy (an XID it treats as fatal, or
  NVML losing the device) by reporting it Unhealthy to the kubelet, which then lowers the node's
  `status.allocatable["nvidia.com/gpu"]` below `status.capacity` (kubelet devicemanager
  `GetCapacity`: capacity counts all devices, allocatable only the healthy ones).
- XID errors and temperature: the dcgm-exporter's `/metrics` (Prometheus text format), read through
  the API server's pod proxy. Labels as dcgm-exporter renders them
  (`internal/pkg/rendermetrics/render_metrics.go`): `gpu` (index), `UUID`, `modelName`, and the host
  label, `Hostname` up to 4.5.x and `hostname` after NVIDIA/dcgm-exporter#655; both are read.
- XIDs are judged over a window: `DCGM_EXP_XID_ERRORS_COUNT`, the exporter's own counter (enabled by
  its line in the counters CSV), one sample per GPU and XID seen within the exporter's window, the
  XID in the `xid` label (dcgm-exporter `pkg/dcgmexporter/collector/xid_collector.go`), the window
  in `window_size_in_ms` (`collector.WindowSizeInMSLabel`; set by `--xid-count-window-size` /
  `DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE`, default 5 minutes).
  `DCGM_FI_DEV_XID_ERRORS` is only the value of the last XID seen since the exporter started: one
  XID a program caused hours ago would fail the node until the exporter restarted, so it is shown,
  not judged. Each XID is named with its meaning (`xid.XIDS`); those NVIDIA's catalogue answers
  with "restart the application" do not fail the node.
- A vGPU guest (every GPU worker of this stack) gets no temperature or power from DCGM: the
  hypervisor owns the board (NVIDIA/dcgm-exporter#236: `DCGM_FI_DEV_GPU_TEMP` "is not collected
  in vGPU clusters"; NVIDIA/gpu-operator#614: no temperature or power on a V100-32C). Each such
  metric is reported as "not available on vGPU" instead of passing in silence; what the guest does
  export is judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from components.k8s.facts import GPU_RESOURCE
from stacks.tools.verify.xid import describe, fails_node

XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"
XID_WINDOW_METRIC = "DCGM_EXP_XID_ERRORS_COUNT"
WINDOW_LABEL = "window_size_in_ms"
TEMP_METRIC = "DCGM_FI_DEV_GPU_TEMP"
POWER_METRIC = "DCGM_FI_DEV_POWER_USAGE"
VGPU_ABSENT = {TEMP_METRIC: "temperature", POWER_METRIC: "power draw"}
"""Metrics DCGM does not export in a vGPU guest (module docstring), and what each measures."""
DEFAULT_MAX_TEMP_C = 85.0
"""Above this a GPU is reported hot; data-centre GPUs start slowing down near 90 C."""

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\d+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


def parse_metrics(text: str) -> list[Sample]:
    """Samples of a Prometheus text exposition (comments and blank lines skipped)."""
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(match["labels"] or "")}
        samples.append(Sample(match["name"], labels, float(match["value"])))
    return samples


@dataclass
class NodeHealth:
    node: str
    problems: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems

    def render(self) -> str:
        head = f"{'PASS' if self.healthy else 'FAIL'} GPU health {self.node}"
        return "\n".join([head, *(f"  {line}" for line in self.lines), *(f"  problem: {p}" for p in self.problems)])


def _window(sample: Sample) -> str:
    """The exporter's XID window, from the sample's label (its default, 5 minutes, without one)."""
    try:
        seconds = int(sample.labels[WINDOW_LABEL]) / 1000
    except (KeyError, ValueError):
        return "5 min (the exporter's default window)"
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def _quantity(value: Any) -> Fraction:
    return Fraction(str(value)) if value is not None else Fraction(0)


def judge_node(
    node: dict[str, Any],
    metrics: str | None,
    *,
    max_temp_c: float = DEFAULT_MAX_TEMP_C,
    expect_metrics: bool = True,
) -> NodeHealth:
    """One GPU node's verdict from its Node object and its exporter's metrics (None: no exporter
    pod answered on the node; not a problem when `expect_metrics` is false, i.e. the stack runs
    no exporter)."""
    name = node["metadata"]["name"]
    health = NodeHealth(name)
    status = node.get("status", {})
    ready: dict[str, Any] = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), {})
    if ready.get("status") != "True":
        # A NotReady node's allocatable and metrics are stale: the kubelet is not reporting.
        health.problems.append(f"node is not Ready ({ready.get('reason', 'no Ready condition')})")
    capacity = _quantity(status.get("capacity", {}).get(GPU_RESOURCE))
    allocatable = _quantity(status.get("allocatable", {}).get(GPU_RESOURCE))
    health.lines.append(f"{GPU_RESOURCE}: {allocatable} allocatable of {capacity}")
    if capacity == 0:
        health.problems.append(f"no {GPU_RESOURCE} in capacity: the device plugin found no GPU on this node")
    elif allocatable < capacity:
        health.problems.append(
            f"{capacity - allocatable} GPU(s) unhealthy: the device plugin lowered allocatable below capacity "
            "(kubectl logs of the plugin pod on this node names the device and the XID)"
        )
    if metrics is None:
        if not expect_metrics:
            return health
        health.problems.append("no dcgm-exporter metrics from this node (is the exporter pod Running here?)")
        return health
    samples = parse_metrics(metrics)
    for sample in samples:
        host = sample.labels.get("Hostname", sample.labels.get("hostname"))
        if host is not None and host != name:
            health.problems.append(f"metrics name host {host!r}, not {name!r}: NODE_NAME is not set on the exporter")
            break
    gpus: dict[str, str] = {}
    for sample in samples:
        if "gpu" in sample.labels:
            gpus[sample.labels["gpu"]] = (
                f"GPU {sample.labels['gpu']} ({sample.labels.get('modelName', 'unknown model')})"
            )
    for sample in samples:
        gpu = gpus.get(sample.labels.get("gpu", "?"), "GPU ?")
        if sample.name == XID_METRIC and sample.value != 0:
            health.lines.append(f"{gpu}: last XID since the exporter started: {describe(int(sample.value))}")
        elif sample.name == XID_WINDOW_METRIC and sample.value > 0:
            xid = int(sample.labels.get("xid", "0") or 0)
            seen = f"{gpu}: {describe(xid)}, {sample.value:g} time(s) in the last {_window(sample)}"
            if fails_node(xid):
                health.problems.append(seen)
            else:
                health.lines.append(f"{seen}: the program's, not the GPU's; the GPU keeps working")
        elif sample.name == TEMP_METRIC:
            health.lines.append(f"{gpu}: {sample.value:g} C")
            if sample.value > max_temp_c:
                health.problems.append(f"{gpu}: {sample.value:g} C, above {max_temp_c:g} C")
        elif sample.name == POWER_METRIC:
            health.lines.append(f"{gpu}: {sample.value:g} W")
    for index, gpu in gpus.items():
        for metric, what in VGPU_ABSENT.items():
            if not any(s.name == metric and s.labels.get("gpu") == index for s in samples):
                health.lines.append(f"{gpu}: {what} not available on vGPU (DCGM exports no {metric} in a vGPU guest)")
    if not any(s.name == XID_METRIC for s in samples):
        health.problems.append(f"the exporter does not export {XID_METRIC} (its counters ConfigMap lacks it)")
    return health
