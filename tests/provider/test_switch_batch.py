"""The group commit's rules, with a recording stand-in for vCenter (the simulator tests in
test_plugin_vsphere.py cover the real reconfigure): changes that arrive together are one batch,
batches of a switch never overlap, a change that arrives meanwhile waits for the next one, two
changes of one host never share a batch, and switches do not wait for each other."""

from __future__ import annotations

import asyncio

import pytest

from components.vcenter.errors import VsphereError
from components.vsphere.dvs_member_batch import MemberChange, Outcome
from provider.switch_batch import SwitchBatcher

WINDOW_S = 0.05
RECONFIGURE_S = 0.2


class FakeSwitches:
    """Applies batches after RECONFIGURE_S, recording them and any overlap on one switch."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[str]]] = []
        self.running: set[str] = set()
        self.overlaps = 0
        self.fail_next: str | None = None
        self.bad_hosts: set[str] = set()
        """A batch with one of these fails for a lasting reason (a pNIC the host lacks)."""

    async def run(self, switch: str, changes: list[MemberChange]) -> dict[str, Outcome]:
        if switch in self.running:
            self.overlaps += 1
        self.running.add(switch)
        try:
            await asyncio.sleep(RECONFIGURE_S)
            self.batches.append((switch, [c.host_name for c in changes]))
            if self.fail_next:
                message, self.fail_next = self.fail_next, None
                raise VsphereError(message, transient=True)  # a transient fault that outlived its retries
            bad = sorted(self.bad_hosts & {c.host_name for c in changes})
            if bad:
                raise VsphereError(f"DvsOperationBulkFault: host {bad[0]}: pnic vmnic9 not found")
            return {c.host_name: None if c.vmnics is None else list(c.vmnics) for c in changes}
        finally:
            self.running.discard(switch)


def join(host: str) -> MemberChange:
    return MemberChange(host, ("vmnic4",))


def test_changes_arriving_together_are_one_batch_and_later_ones_the_next() -> None:
    switches = FakeSwitches()

    async def scenario() -> list[list[str] | None]:
        batcher = SwitchBatcher(switches.run, window_s=WINDOW_S)
        first = [asyncio.create_task(batcher.submit("dvs-1", join(f"h{i}"))) for i in range(8)]
        await asyncio.sleep(WINDOW_S + RECONFIGURE_S / 2)  # the first batch is running now
        later = [asyncio.create_task(batcher.submit("dvs-1", join(f"h{i}"))) for i in range(8, 12)]
        return await asyncio.gather(*first, *later)

    results = asyncio.run(scenario())

    assert results == [["vmnic4"]] * 12
    assert switches.batches == [("dvs-1", [f"h{i}" for i in range(8)]), ("dvs-1", [f"h{i}" for i in range(8, 12)])]
    assert switches.overlaps == 0


def test_two_changes_of_one_host_never_share_a_batch() -> None:
    switches = FakeSwitches()

    async def scenario() -> None:
        batcher = SwitchBatcher(switches.run, window_s=WINDOW_S)
        await asyncio.gather(
            batcher.submit("dvs-1", join("h1")),
            batcher.submit("dvs-1", MemberChange("h1", None)),
            batcher.submit("dvs-1", join("h2")),
        )

    asyncio.run(scenario())

    assert switches.batches == [("dvs-1", ["h1", "h2"]), ("dvs-1", ["h1"])]


def test_a_failed_batch_fails_each_of_its_changes_and_the_next_batch_still_runs() -> None:
    switches = FakeSwitches()
    switches.fail_next = "ReconfigureDvs_Task failed: DvsFault: uplink vmnic4 in use"

    async def scenario() -> tuple[list[BaseException | list[str] | None], list[str] | None]:
        batcher = SwitchBatcher(switches.run, window_s=WINDOW_S)
        failed = await asyncio.gather(*(batcher.submit("dvs-1", join(h)) for h in ("h1", "h2")), return_exceptions=True)
        return failed, await batcher.submit("dvs-1", join("h3"))

    failed, after = asyncio.run(scenario())

    assert all(isinstance(error, VsphereError) for error in failed)
    assert [str(error) for error in failed] == [
        "ReconfigureDvs_Task failed: DvsFault: uplink vmnic4 in use (batch of 2 hosts)"
    ] * 2
    assert after == ["vmnic4"]


def test_a_batch_refused_for_a_lasting_reason_is_split_until_the_bad_host_is_alone() -> None:
    """Issue 43 item 4: one host that cannot join fails alone, with its own reason; the others join."""
    switches = FakeSwitches()
    switches.bad_hosts = {"h3"}

    async def scenario() -> list[BaseException | list[str] | None]:
        batcher = SwitchBatcher(switches.run, window_s=WINDOW_S)
        hosts = [f"h{i}" for i in range(5)]
        return await asyncio.gather(*(batcher.submit("dvs-1", join(h)) for h in hosts), return_exceptions=True)

    results = asyncio.run(scenario())

    assert results[:3] == [["vmnic4"]] * 3 and results[4] == ["vmnic4"]
    assert isinstance(results[3], VsphereError)
    assert str(results[3]) == "DvsOperationBulkFault: host h3: pnic vmnic9 not found"
    applied = [hosts for _, hosts in switches.batches]
    assert applied[0] == ["h0", "h1", "h2", "h3", "h4"]
    assert ["h3"] in applied and len(applied) <= 1 + 2 * 3  # about 2*log2(n) more, once


def test_switches_do_not_wait_for_each_other() -> None:
    switches = FakeSwitches()

    async def scenario() -> float:
        batcher = SwitchBatcher(switches.run, window_s=WINDOW_S)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.gather(*(batcher.submit(f"dvs-{i}", join("h1")) for i in range(4)))
        return loop.time() - started

    elapsed = asyncio.run(scenario())

    assert sorted(switch for switch, _ in switches.batches) == [f"dvs-{i}" for i in range(4)]
    assert elapsed < WINDOW_S + 2 * RECONFIGURE_S


@pytest.mark.parametrize("hosts", [1, 64])
def test_one_window_per_batch_whatever_its_size(hosts: int) -> None:
    switches = FakeSwitches()

    async def scenario() -> None:
        batcher = SwitchBatcher(switches.run, window_s=WINDOW_S)
        await asyncio.gather(*(batcher.submit("dvs-1", join(f"h{i}")) for i in range(hosts)))

    asyncio.run(scenario())

    assert [len(names) for _, names in switches.batches] == [hosts]
