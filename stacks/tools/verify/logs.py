"""What a training job's launcher log says, and the verdict on it: pure functions, no cluster.

Formats read, from the projects' sources:
- NCCL (NVIDIA/nccl debug.cc, net_ib.cc, net_socket.cc, init.cc), every line prefixed
  `<host>:<pid>:<tid> [<dev>] NCCL INFO `:
  `NET/IB : Using [0]vmw_pvrdma0:1/RoCE ; OOB eth0:10.244.1.7<0>`, `NET/Socket : Using [0]rdma0:…`,
  `Using network IB` (or `Socket`, or an external plugin's name such as `IBext`), `NCCL version 2.27.6+cuda12.4`.
- nccl-tests (NVIDIA/nccl-tests common.cu): result rows `size count type redop root time algbw
  busbw #wrong time algbw busbw #wrong`, `# Avg bus bandwidth    : 10.9345`, and
  `#  Rank  0 Group  0 Pid     41 on <host> device  0 [0000:0b:00] <GPU name>`.
- tf_cnn_benchmarks (tensorflow/benchmarks benchmark_cnn.py): `total images/sec: 1234.56`, printed
  by every Horovod rank, each the cluster-wide figure; TensorFlow's `Created device … -> device: 0,
  name: Tesla V100-SXM2-16GB, pci bus id: …`.
- our PyTorch script (components/k8s/jobs/files/ddp_resnet50.py): `ddp_resnet50: 4 ranks, GPU <name>,
  batch …` and `total images/sec: 8123.45`.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import Literal

Transport = Literal["roce", "tcp"]

_NCCL_INFO = r"NCCL INFO "
_USING_NETWORK = re.compile(_NCCL_INFO + r"Using network (\S+)")
_NET_IB = re.compile(_NCCL_INFO + r"NET/IB : Using (\[\d+\]\S+)")
_NET_IB_NONE = re.compile(_NCCL_INFO + r"NET/IB : No device found")
_NET_SOCKET = re.compile(_NCCL_INFO + r"NET/Socket : Using (\[\d+\]\S+)")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
# Line-bound patterns: `[ \t]`, never `\s`, which under MULTILINE also matches a newline, so a row
# cut in two (ranks' output interleaved, a wrapped line) would be read as one, or a row would take
# its in-place columns from the next line.
_SP = r"[ \t]"
_RESULT_ROW = re.compile(
    rf"^{_SP}*(\d+){_SP}+(\d+){_SP}+[a-z0-9_]+{_SP}+[a-z]+{_SP}+-?\d+{_SP}+[\d.]+{_SP}+([\d.]+){_SP}+([\d.]+)"
    rf"{_SP}+\S+(?:{_SP}+[\d.]+{_SP}+([\d.]+){_SP}+([\d.]+))?",
    re.MULTILINE,
)
_AVG_BUS = re.compile(rf"^# Avg bus bandwidth{_SP}*: ([\d.eE+-]+)", re.MULTILINE)
_OUT_OF_BOUNDS = re.compile(rf"^# Out of bounds values{_SP}*: (\d+)", re.MULTILINE)
_TOTAL_IMAGES = re.compile(r"^total images/sec: ([\d.]+)", re.MULTILINE)
_GPU_NAMES = (
    re.compile(r"^ddp_resnet50: \d+ ranks, GPU (.+?), batch", re.MULTILINE),
    # TensorFlow >= 2.5 "Created device … memory:  -> device: 0, name: X, pci bus id: …"; older
    # "Created TensorFlow device (…) -> physical GPU (device: 0, name: X, pci bus id: …)".
    re.compile(r"-> (?:physical GPU \()?device: \d+, name: ([^,]+), pci bus id"),
    re.compile(
        rf"^#{_SP}+Rank{_SP}+\d+ Group{_SP}+\d+ Pid{_SP}+\d+ on{_SP}+\S+ device{_SP}+\d+ \[[^\]]*\] (.+)$", re.MULTILINE
    ),
)

REFERENCE_IMAGES_PER_SEC: dict[str, float] = {"V100": 1276.0, "A100": 2075.0}
"""tf_cnn_benchmarks ResNet-50, fp16, one GPU, images/sec (Lambda's TensorFlow GPU benchmarks,
https://lambdalabs.com/gpu-benchmarks, as quoted in issue 16). Bare-metal, whole GPUs: a vGPU
profile that shares its GPU, or the PyTorch benchmark, is compared against them only as a yardstick."""


@dataclass(frozen=True)
class NcclEvidence:
    """Which network NCCL says it used."""

    network: str | None
    """NCCL's own word (`Using network X`), else inferred from which module listed devices."""
    devices: str | None
    """The devices of that module as NCCL listed them, e.g. `[0]vmw_pvrdma0:1/RoCE`."""
    version: str | None

    @property
    def transport(self) -> Transport | None:
        if self.network is None:
            return None
        if self.network.startswith("IB"):
            return "roce"
        if self.network.startswith("Socket"):
            return "tcp"
        return None


def nccl_evidence(log: str) -> NcclEvidence:
    ib = _NET_IB.findall(log)
    socket = _NET_SOCKET.findall(log)
    networks = _USING_NETWORK.findall(log)
    network = networks[-1] if networks else ("IB" if ib else ("Socket" if socket else None))
    devices = (ib or [None])[-1] if network and network.startswith("IB") else (socket or [None])[-1]
    version = _NCCL_VERSION.search(log)
    return NcclEvidence(network=network, devices=devices, version=version.group(1) if version else None)


def peak_bus_bandwidth(log: str) -> float | None:
    """Highest busbw (GB/s) of any result row, out-of-place or in-place."""
    values = [float(v) for row in _RESULT_ROW.findall(log) for v in (row[3], row[5]) if v]
    return max(values) if values else None


def wrong_values(log: str) -> int:
    match = _OUT_OF_BOUNDS.search(log)
    return int(match.group(1)) if match else 0


def total_images_per_sec(log: str) -> float | None:
    """The cluster-wide rate; Horovod ranks each print it, so take their median."""
    values = [float(v) for v in _TOTAL_IMAGES.findall(log)]
    return statistics.median(values) if values else None


def gpu_name(log: str) -> str | None:
    for pattern in _GPU_NAMES:
        match = pattern.search(log)
        if match:
            return match.group(1).strip()
    return None


def reference_for(gpu: str | None) -> tuple[str, float] | None:
    for key, value in REFERENCE_IMAGES_PER_SEC.items():
        if gpu and key in gpu.upper():
            return key, value
    return None


@dataclass
class Verdict:
    """One job's lines and whether it passed."""

    job: str
    lines: list[str] = field(default_factory=list)
    passed: bool = True

    def fail(self, line: str) -> None:
        self.lines.append(line)
        self.passed = False

    def render(self) -> str:
        status = "PASS" if self.passed else "FAIL"
        return "\n".join([f"{self.job}:", *(f"  {line}" for line in self.lines), f"  {status}"])


def judge_transport(verdict: Verdict, log: str, want: Transport) -> None:
    nccl = nccl_evidence(log)
    version = f" (NCCL {nccl.version})" if nccl.version else ""
    if nccl.network is None:
        verdict.fail(f"transport: NCCL logged no network{version}; is NCCL_DEBUG=INFO set?")
        return
    used = f"{nccl.network} {nccl.devices or ''}".strip()
    if nccl.transport == want:
        verdict.lines.append(f"transport: {used}{version}: {want}, as configured")
        return
    if want == "roce" and _NET_IB_NONE.search(log):
        used += ", after 'NET/IB : No device found'"
    verdict.fail(f"transport: {used}{version}: NOT {want} (jobs.transport): NCCL fell back")


def judge_fabric(
    verdict: Verdict, log: str, *, want: Transport, link_gbps: float, min_share: float, succeeded: bool
) -> None:
    judge_transport(verdict, log, want)
    link = link_gbps / 8
    peak = peak_bus_bandwidth(log)
    if peak is None:
        verdict.fail("bus bandwidth: no all_reduce_perf results in the launcher log")
    else:
        share = peak / link
        line = f"bus bandwidth: peak {peak:.2f} GB/s = {100 * share:.1f} % of the {link:.2f} GB/s link ({link_gbps:g} Gb/s)"
        if want == "roce" and share < min_share:
            verdict.fail(f"{line}: below the required {100 * min_share:.0f} %")
        else:
            verdict.lines.append(line)
    if wrong_values(log):
        verdict.fail(f"all_reduce_perf found {wrong_values(log)} wrong values")
    if not succeeded:
        verdict.fail("the MPIJob did not succeed (its launcher exits non-zero on a failed check)")


def judge_benchmark(verdict: Verdict, log: str, *, want: Transport, gpus: int, succeeded: bool) -> None:
    judge_transport(verdict, log, want)
    total = total_images_per_sec(log)
    if total is None:
        verdict.fail("throughput: no 'total images/sec:' line in the launcher log")
    else:
        per_gpu = total / gpus
        gpu = gpu_name(log)
        line = f"throughput: {total:.1f} images/sec over {gpus} GPU(s) = {per_gpu:.1f} per GPU"
        reference = reference_for(gpu)
        if reference:
            key, value = reference
            line += f"; {100 * per_gpu / value:.0f} % of the {key} reference ({value:,.0f}, tf_cnn_benchmarks fp16)"
        elif gpu:
            line += f"; no published reference for {gpu}"
        verdict.lines.append(line)
    if not succeeded:
        verdict.fail("the MPIJob did not succeed")
