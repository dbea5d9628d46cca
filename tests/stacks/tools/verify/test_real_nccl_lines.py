"""verify's NCCL parsers against what a real NCCL printed, not what we wrote.

fixtures/real-nccl-2.28.9-no-ib.log was captured on 2026-11-28 on the GPU machine lent to this
project (one NVIDIA H200, PyTorch's NCCL 2.28.9+cuda13.0): a one-rank `torch.distributed`
all_reduce with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=ALL, on a machine without an InfiniBand or
RoCE device. So it is the socket fallback as NCCL itself reports it, hostname `vm`. Three of its
lines differ from what our samples assumed and what older NCCL printed:
- `NET/IB : No device found.` (a full stop at the end);
- `NET/IB : Using [RO]; OOB eth0:192.0.2.2<0>`: printed although no IB device was found, with
  no `[N]device` before `;`: it must not count as an RDMA device;
- `ncclCommInitRankConfig comm 0x... rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 60 commId 0x...
  - Init COMPLETE`: the per-rank line coverage falls back to.
"""

from __future__ import annotations

from pathlib import Path

from stacks.tools.verify.coverage import coverage
from stacks.tools.verify.logs import Verdict, judge_transport, nccl_evidence

LOG = (Path(__file__).parent / "fixtures" / "real-nccl-2.28.9-no-ib.log").read_text()


def test_the_real_socket_fallback_is_read_as_sockets() -> None:
    evidence = nccl_evidence(LOG)
    assert (evidence.network, evidence.transport, evidence.version) == ("Socket", "tcp", "2.28.9")
    assert evidence.devices == "[0]eth0:192.0.2.2<0>"


def test_a_roce_job_that_fell_back_fails_and_says_why() -> None:
    verdict = Verdict("training/nccl-fabric-check-roce")
    judge_transport(verdict, LOG, "roce")
    assert not verdict.passed
    assert "NOT roce" in verdict.lines[0] and "No device found" in verdict.lines[0], verdict.lines


def test_nccls_empty_ib_line_is_no_rdma_device() -> None:
    assert "NET/IB : Using [RO]; OOB" in LOG  # the line is there ...
    assert coverage(LOG, "roce").devices == {}  # ... and names no device
    assert coverage(LOG, "tcp").devices == {"vm": "[0]eth0:192.0.2.2<0>"}


def test_each_rank_is_found_in_nccls_own_init_line() -> None:
    assert coverage(LOG, "tcp").ranks == {0: "vm"}
