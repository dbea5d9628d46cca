"""A wall-clock deadline for one vCenter operation, enforced on its sockets.

Why: a socket timeout bounds each read, not a call. pyVmomi reads an answer in many reads
(`http.client` over `SoapStubAdapter`'s pooled connections, pyVmomi/SoapAdapter.py
`InvokeMethod`), so an answer that trickles in a byte at a time never trips the 60 s timeout:
one 120-second read was seen to take 331 s and more (issue 43). And a retry loop that checks its
deadline only between attempts cannot end an attempt that is blocked.

How: `operation_deadline(seconds)` sets the deadline of the calls made inside it (a ContextVar:
each worker thread's operation has its own). The vCenter connections of `components.vcenter.session`
are `BoundedHTTPConnection`s: before each request they refuse to start past the deadline
(`DeadlineExceeded`, a TimeoutError, so the retry loop sees a transient error and stops because
its own deadline passed) and shorten the socket timeout to what is left; while the request runs,
one watchdog thread shuts down the socket of every connection whose deadline passed, which wakes a
blocked read at once (shutdown(2) on Linux: a blocked recv returns end of file).

A connection serves one operation at a time, not one for life: pyVmomi returns it to the
session's pool after each answer (`SoapStubAdapter.ReturnConnection`), where any other operation
takes it next (`GetConnection`). So a connection belongs to the deadline of the request it runs
now, from that request's start (`_bound`) until it goes back to the pool (`release`), and a
deadline shuts only the connections it still owns: another operation's call on a connection this
one used before keeps its own bound (issue 51: B, with 30 s left, lost its socket when A's passed).
"""

from __future__ import annotations

import contextlib
import heapq
import http.client
import itertools
import socket
import threading
import time
import weakref
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any


class DeadlineExceeded(TimeoutError):
    """The operation's wall-clock deadline passed (a TimeoutError: a connection-level failure)."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.expired = False
        self._connections: weakref.WeakSet[http.client.HTTPConnection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        """The operation ended: its connections (kept in a session's pool) are no longer watched."""
        with self._lock:
            self._closed = True
            self._connections = weakref.WeakSet()

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def check(self) -> None:
        if self.expired or self.remaining() <= 0:
            raise DeadlineExceeded(f"the operation's {self.seconds:g}s bound passed")

    def watch(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            self._connections.add(connection)
        if self.expired:
            _shut(connection, self)

    def expire(self) -> None:
        """The watchdog's act: the socket of every connection this deadline still owns is shut down."""
        with self._lock:
            if self._closed:
                return
            self.expired = True
            connections = list(self._connections)
        for connection in connections:
            _shut(connection, self)


_OWNERS: weakref.WeakKeyDictionary[http.client.HTTPConnection, Deadline] = weakref.WeakKeyDictionary()
_OWNERS_LOCK = threading.Lock()
"""Which deadline's request each connection runs now; a deadline shuts a socket only under this
lock and only while it owns it, so a connection another operation took meanwhile is never shut."""


def _own(connection: http.client.HTTPConnection, deadline: Deadline | None) -> None:
    with _OWNERS_LOCK:
        if deadline is None:
            _OWNERS.pop(connection, None)
        else:
            _OWNERS[connection] = deadline


def release(connection: http.client.HTTPConnection) -> None:
    """The connection's answer is read and it goes back to the pool: no deadline owns it now."""
    _own(connection, None)


def _shut(connection: http.client.HTTPConnection, deadline: Deadline) -> None:
    with _OWNERS_LOCK:
        if _OWNERS.get(connection) is not deadline:
            return
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Watchdog:
    """One thread for every deadline of the process: wakes at the earliest and expires it."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, weakref.ref[Deadline]]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, deadline: Deadline) -> None:
        with self._wake:
            heapq.heappush(self._heap, (deadline.at, next(self._order), weakref.ref(deadline)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="vcenter-deadlines", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._wake.wait(None if not self._heap else self._heap[0][0] - time.monotonic())
                _, _, ref = heapq.heappop(self._heap)
            deadline = ref()
            if deadline is not None:
                deadline.expire()


_WATCHDOG = _Watchdog()
_CURRENT: ContextVar[Deadline | None] = ContextVar("vcenter_deadline", default=None)


def current() -> Deadline | None:
    """The deadline of the operation this thread runs, if any."""
    return _CURRENT.get()


def remaining(default: float) -> float:
    """Seconds left to the current operation's deadline, or `default` outside one."""
    deadline = current()
    return default if deadline is None else min(default, deadline.remaining())


@contextlib.contextmanager
def operation_deadline(seconds: float) -> Iterator[Deadline]:
    """Every vCenter call inside the block ends by `seconds` from now (an earlier outer one wins)."""
    outer = current()
    if outer is not None and outer.remaining() <= seconds:
        yield outer
        return
    deadline = Deadline(seconds)
    token = _CURRENT.set(deadline)
    _WATCHDOG.add(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)
        deadline.close()


class _Bounded:
    """Mixin for http.client connections: each request ends by the current operation's deadline."""

    sock: Any
    timeout: Any
    _first_timeout: Any
    _base_timeout: float | None

    def _bound(self) -> None:
        deadline = current()
        if not hasattr(self, "_base_timeout"):  # its own timeout, before any deadline shortened it
            self._first_timeout = self.timeout
            self._base_timeout = self.timeout if isinstance(self.timeout, (int, float)) else None
        base: float | None = self._base_timeout
        if deadline is None:
            # A call outside any operation: the connection's own timeout, not the last owner's rest.
            _own(self, None)  # type: ignore[arg-type]
            self.timeout = base if base is not None else self._first_timeout
        else:
            deadline.check()
            _own(self, deadline)  # type: ignore[arg-type]
            deadline.watch(self)  # type: ignore[arg-type]
            left = max(0.001, deadline.remaining())
            self.timeout = left if base is None else min(base, left)
        if self.sock is not None:
            timeout = self.timeout
            self.sock.settimeout(
                timeout if timeout is None or isinstance(timeout, (int, float)) else socket.getdefaulttimeout()
            )

    def connect(self) -> None:
        self._bound()
        super().connect()  # type: ignore[misc]

    def request(self, *args: Any, **kwargs: Any) -> None:
        self._bound()
        super().request(*args, **kwargs)  # type: ignore[misc]


class BoundedHTTPConnection(_Bounded, http.client.HTTPConnection):
    pass


class BoundedHTTPSConnection(_Bounded, http.client.HTTPSConnection):
    pass
