"""Group commit of switch membership changes: the hosts that join (or leave) one switch at about
the same time go to vCenter in one `ReconfigureDvs_Task` (components/vsphere/dvs_member_batch.py).

Per switch, the first change opens a short gathering window; when it closes, every change that
arrived meanwhile goes in one batch. While a batch runs, new changes wait for the next one: the
batches of a switch never overlap, since vCenter refuses a second reconfigure of a switch while
one runs (DvsOperationBulkFault; vcsim/dvs_reconfigure.go). Each resource's call returns when its
batch is done, with its own outcome or the batch's fault.

The window costs at most `window_s` per batch against ~20 s per reconfigure: the engine starts the
members of a switch together, as soon as the switch exists (they depend on it alone), so one
window catches them all. Waiting happens on the event loop, not on a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from components.vcenter.errors import VsphereError
from components.vsphere.dvs_member_batch import MemberChange, Outcome

DEFAULT_WINDOW_S = 2.0

RunBatch = Callable[[str, list[MemberChange]], Awaitable[dict[str, Outcome]]]
"""Applies one batch to one switch (by UUID); returns each host's outcome."""


@dataclass
class _Pending:
    change: MemberChange
    done: asyncio.Future[list[str] | None] = field(repr=False)


class SwitchBatcher:
    def __init__(self, run_batch: RunBatch, *, window_s: float = DEFAULT_WINDOW_S) -> None:
        self._run_batch = run_batch
        self.window_s = window_s
        self._pending: dict[str, list[_Pending]] = {}
        self._drainers: dict[str, asyncio.Task[None]] = {}
        self.batches: list[tuple[str, list[str]]] = []
        """(switch, hosts) of each batch sent, in order (for logs and tests)."""

    async def submit(self, switch_uuid: str, change: MemberChange) -> list[str] | None:
        """Queue the change; return the host's uplinks once its batch is applied (None: left)."""
        pending = _Pending(change, asyncio.get_running_loop().create_future())
        self._pending.setdefault(switch_uuid, []).append(pending)
        drainer = self._drainers.get(switch_uuid)
        if drainer is None or drainer.done():
            self._drainers[switch_uuid] = asyncio.create_task(self._drain(switch_uuid))
        return await pending.done

    def _take_batch(self, switch_uuid: str) -> list[_Pending]:
        """The oldest change of each host; a host's later change waits for the next batch."""
        queue = self._pending.get(switch_uuid, [])
        batch: list[_Pending] = []
        hosts: set[str] = set()
        rest: list[_Pending] = []
        for pending in queue:
            if pending.change.host_name in hosts:
                rest.append(pending)
            else:
                hosts.add(pending.change.host_name)
                batch.append(pending)
        self._pending[switch_uuid] = rest
        return batch

    async def _drain(self, switch_uuid: str) -> None:
        while self._pending.get(switch_uuid):
            await asyncio.sleep(self.window_s)
            await self._apply(switch_uuid, self._take_batch(switch_uuid))

    async def _apply(self, switch_uuid: str, batch: list[_Pending]) -> None:
        """Run one batch; when vCenter refuses it for a lasting reason, split it in halves and run
        each, until the host at fault is alone: the others go ahead, and its error is its own.

        vCenter applies a reconfigure's whole spec or none of it, so one host that cannot join
        (a pNIC it lacks) or leave (a vmknic still on the switch) fails the batch; a failed
        batch of n hosts with one bad host costs about 2*log2(n) more reconfigures, once. A
        transient fault that outlived its retries fails the batch as it is: a split would only
        meet the same unreachable vCenter again."""
        self.batches.append((switch_uuid, [p.change.host_name for p in batch]))
        try:
            outcomes = await self._run_batch(switch_uuid, [p.change for p in batch])
        except Exception as exc:  # the reconfigure failed: no host of the batch changed
            if len(batch) > 1 and not getattr(exc, "transient", False):
                half = len(batch) // 2
                await self._apply(switch_uuid, batch[:half])
                await self._apply(switch_uuid, batch[half:])
                return
            suffix = f" (batch of {len(batch)} hosts)" if len(batch) > 1 else ""
            for pending in batch:
                if not pending.done.done():
                    pending.done.set_exception(VsphereError(f"{exc}{suffix}", fault=getattr(exc, "fault", None)))
            return
        for pending in batch:
            if pending.done.done():
                continue
            outcome = outcomes.get(pending.change.host_name)
            if isinstance(outcome, Exception):
                pending.done.set_exception(outcome)
            else:
                pending.done.set_result(outcome)
