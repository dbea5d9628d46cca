"""Retries with backoff and a wall-clock deadline, and waiting for vim Tasks (community.vmware style)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from pyVmomi import vim, vmodl

from components.vcenter import deadline as call_deadline
from components.vcenter.errors import VsphereError
from components.vcenter.faults import fault_text, is_transient

T = TypeVar("T")


def backoff_delays(*, base: float, cap: float, attempts: int, rng: Callable[[], float] = random.random) -> list[float]:
    """Exponential backoff with jitter: delay i is in [base*2^i / 2, base*2^i], capped."""
    return [min(cap, base * 2**i) * (0.5 + rng() / 2) for i in range(attempts)]


def with_retries(
    fn: Callable[[], T],
    *,
    what: str,
    attempts: int = 6,
    base_delay: float = 0.5,
    max_delay: float = 8.0,
    max_total: float = 120.0,
    on_transient: Callable[[BaseException], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `fn`, retrying transient faults with exponential backoff and jitter.

    Lasting faults fail at once. `max_total` is a wall-clock deadline from the first call: no
    attempt starts, and no sleep is taken, past it. It bounds the whole only because each attempt
    is bounded itself (every socket has a timeout: `components.vcenter.session`). Errors are re-raised as VsphereError carrying the fault
    text and `what`.
    """
    start = time.monotonic()
    slept = 0.0
    delays = backoff_delays(base=base_delay, cap=max_delay, attempts=max(0, attempts - 1))
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:  # classified right below
            transient = is_transient(exc)
            if transient and on_transient is not None:
                on_transient(exc)
            # Sleeps count even when `sleep` is not time.sleep (tests), so the bound holds.
            elapsed = max(time.monotonic() - start, slept)
            last = attempt + 1 >= attempts
            if not transient or last or elapsed + delays[attempt] > max_total:
                if isinstance(exc, VsphereError) and not transient:
                    raise
                note = ""
                if transient and not last:  # the deadline, not the attempt cap, ended it
                    note = f" (no success within the operation's {max_total:g}s bound; {attempt + 1} attempts)"
                elif transient:
                    note = f" (gave up after {attempt + 1} attempts in {elapsed:.0f}s)"
                object_name = exc.object_name if isinstance(exc, VsphereError) else None
                raise VsphereError(
                    f"{what}: {fault_text(exc)}{note}",
                    object_name=object_name,
                    fault=exc,
                    transient=transient,
                ) from exc
            sleep(delays[attempt])
            slept += delays[attempt]
    raise AssertionError("unreachable")  # pragma: no cover


def wait_for_task(
    task: Any,
    *,
    timeout: float = 600.0,
    object_name: str | None = None,
    what: str | None = None,
    poll_initial: float = 0.1,
    poll_max: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """Wait for a vim Task; return its result, or raise VsphereError with the fault text.

    `timeout` is a wall-clock deadline; polls back off from `poll_initial` to `poll_max`.
    """
    # The operation's own deadline (components/vcenter/deadline.py) ends the wait too, if sooner.
    timeout = call_deadline.remaining(timeout)
    deadline = time.monotonic() + timeout
    delay = poll_initial
    while True:
        info = task.info
        if info.state == vim.TaskInfo.State.success:
            return info.result
        label = what or info.descriptionId or "task"
        name = object_name or info.entityName or "?"
        if info.state == vim.TaskInfo.State.error:
            error = info.error
            raise VsphereError(
                f"{label} on {name} failed: {fault_text(error) if error else 'unknown error'}",
                object_name=name,
                fault=error,
                transient=bool(error is not None and is_transient(error)),
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise VsphereError(
                f"{label} on {name} did not finish within {timeout:.0f}s (task {task._moId})",
                object_name=name,
            )
        sleep(min(remaining, delay * (0.75 + random.random() / 2)))
        delay = min(poll_max, delay * 1.5)


_ACTIVE = (vim.TaskInfo.State.queued, vim.TaskInfo.State.running)


def active_tasks(si: Any, entity: Any, description: str | tuple[str, ...]) -> list[tuple[Any, Any]]:
    """(task, info) of the queued or running tasks on `entity` whose descriptionId ends with
    `description` (vCenter's vmodl names: "DistributedVirtualSwitch.reconfigure", "VirtualMachine.clone";
tests/components/vsphere/test_task_description_ids.py), from the TaskManager's recent tasks
    (vSphere API reference, TaskManager.recentTask: "completed recently, currently running, or
    queued to run"), read in few property-collector calls.

    What a retry asks before it starts a task again: the first attempt's task may still run after
    its answer was lost (a reset connection, a killed plugin), and a second one would make a
    duplicate (a clone) or be refused while the first runs (a switch reconfigure)."""
    content = si.RetrieveContent()
    tasks = list(content.taskManager.recentTask or [])
    if not tasks:
        return []
    # Two reads: the description and state of every recent task, then the whole info of the few
    # that match. Not `info` of all at once: a task on a non-entity (the simulator's FileManager)
    # makes pyVmomi refuse the whole answer (TaskInfo.entity is typed ManagedEntity).
    spec = vmodl.query.PropertyCollector.FilterSpec(
        objectSet=[vmodl.query.PropertyCollector.ObjectSpec(obj=task, skip=False) for task in tasks],
        propSet=[
            vmodl.query.PropertyCollector.PropertySpec(type=vim.Task, pathSet=["info.descriptionId", "info.state"])
        ],
    )
    try:
        brief = [
            (obj.obj, {prop.name: prop.val for prop in obj.propSet})
            for obj in content.propertyCollector.RetrieveContents([spec]) or []
        ]
    except vmodl.fault.ManagedObjectNotFound:  # a task aged out between the two reads: look again later
        return []
    found = []
    for task, props in brief:
        if props.get("info.state") not in _ACTIVE or not str(props.get("info.descriptionId", "")).endswith(description):
            continue
        try:
            info = task.info
        except vmodl.fault.ManagedObjectNotFound:
            continue
        if info.entity is not None and info.entity._moId == entity._moId and info.state in _ACTIVE:
            found.append((task, info))
    return found
