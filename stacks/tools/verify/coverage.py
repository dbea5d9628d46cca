"""Did the fabric check run on every GPU worker and every GPU, each worker through its own NIC?

A fabric check that ran on some workers says nothing of the others' RDMA path, yet its bandwidth
and transport lines read as a PASS (issue 54: six ranks on three hosts of six). The launcher log
says which ranks ran where and which network device each worker's NCCL opened:

- nccl-tests (NVIDIA/nccl-tests src/common.cu) prints, from rank 0, one line per rank:
  `#  Rank  3 Group  0 Pid     42 on <hostname> device  1 [0000:0c:00] <GPU name>`;
- NCCL with `NCCL_DEBUG=INFO` prefixes every line `<hostname>:<pid>:<tid> [<cudaDev>] NCCL INFO `
  (src/debug.cc) and prints on every rank `... rank <r> nranks <n> cudaDev <d> ... - Init
  COMPLETE` (src/init.cc), and on every process that uses the IB transport the devices it opened:
  `NET/IB : Using [0]vmw_pvrdma0:1/RoCE [RO]; OOB eth0:...` (src/transport/net_ib.cc), or for
  sockets `NET/Socket : Using [0]eth0:...` (src/transport/net_socket.cc).

The hostname is the worker pod's (over TCP the node's: host network). Judged: the ranks are the
stack's GPUs (every GPU worker x its vGPUs), they ran on as many workers, and each of those
workers logged a device of the transport the job asks for. A log without per-rank lines cannot
show coverage, which is a FAIL too (NCCL_DEBUG=INFO is what the jobs set: transport.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stacks.tools.verify.logs import Transport, Verdict

_PREFIX = r"^(?P<host>[^\s:]+):\d+:\d+ \[\d+\] NCCL INFO "
_INIT_COMPLETE = re.compile(_PREFIX + r".*?\brank (?P<rank>\d+) nranks (?P<nranks>\d+) .*- Init COMPLETE", re.MULTILINE)
_TESTS_RANK = re.compile(
    r"^#[ \t]+Rank[ \t]+(?P<rank>\d+) Group[ \t]+\d+ Pid[ \t]+\d+ on[ \t]+(?P<host>\S+) ", re.MULTILINE
)
_NET_DEVICES = {
    "roce": re.compile(_PREFIX + r"NET/IB : Using (?P<devices>\[\d+\][^;\s]+)", re.MULTILINE),
    "tcp": re.compile(_PREFIX + r"NET/Socket : Using (?P<devices>\[\d+\][^;\s]+)", re.MULTILINE),
}
_MODULE = {"roce": "NET/IB", "tcp": "NET/Socket"}


@dataclass(frozen=True)
class Coverage:
    ranks: dict[int, str]
    """Rank -> the hostname it ran on (nccl-tests' rank lines, else NCCL's Init COMPLETE lines)."""
    devices: dict[str, str]
    """Hostname -> the first network device NCCL opened there, of the judged transport."""

    @property
    def hosts(self) -> list[str]:
        return sorted(set(self.ranks.values()))


def coverage(log: str, transport: Transport) -> Coverage:
    ranks = {int(m["rank"]): m["host"] for m in _TESTS_RANK.finditer(log)}
    if not ranks:
        ranks = {int(m["rank"]): m["host"] for m in _INIT_COMPLETE.finditer(log)}
    devices: dict[str, str] = {}
    for match in _NET_DEVICES[transport].finditer(log):
        devices.setdefault(match["host"], match["devices"])
    return Coverage(ranks=ranks, devices=devices)


def judge_coverage(verdict: Verdict, log: str, *, want: Transport, workers: int, gpus: int) -> None:
    """FAIL unless `gpus` ranks ran on `workers` hosts, each with a `want` device in NCCL's lines."""
    found = coverage(log, want)
    module = _MODULE[want]
    if not found.ranks:
        verdict.fail(
            "coverage: no rank's hostname in the log (nccl-tests' '#  Rank N ... on HOST' lines, NCCL's "
            "'Init COMPLETE' lines): which workers ran cannot be told; is NCCL_DEBUG=INFO set?"
        )
        return
    hosts = found.hosts
    short = []
    if len(found.ranks) < gpus:
        short.append(f"{len(found.ranks)} rank(s) ran, the stack's GPU workers have {gpus} GPUs")
    if len(hosts) < workers:
        short.append(f"ranks on {len(hosts)} of the {workers} GPU workers ({', '.join(hosts)})")
    if short:
        verdict.fail(
            f"coverage: {'; '.join(short)}: the workers left out were never tested, whatever the bandwidth "
            "says; run the fabric check on every GPU worker with all its GPUs (leave jobs.workers unset)"
        )
    # No worker with a device of that module: NCCL used another network, which the transport line
    # already FAILs; name the workers only when some did and some did not.
    silent = [host for host in hosts if host not in found.devices] if found.devices else []
    if silent:
        verdict.fail(
            f"coverage: no '{module} : Using [N]<device>' line from {', '.join(silent)}: NCCL on that worker "
            f"opened no {module} device, so its RDMA NIC carried nothing (every worker whose NCCL uses it "
            "logs one)"
        )
    if not short and not silent and found.devices:
        opened = ", ".join(f"{host} {found.devices[host]}" for host in hosts)
        verdict.lines.append(
            f"coverage: {len(found.ranks)} ranks on all {len(hosts)} GPU workers, each through {module}: {opened}"
        )
