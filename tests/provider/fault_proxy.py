"""A loopback HTTP fault proxy in front of the vCenter simulator: each SOAP request that passes it
can be reset before it is forwarded, reset after vCenter answered it (the request took effect, the
answer is lost), cut in the middle of its answer, stalled, trickled a byte at a time, or swallowed
(a black hole that takes connections and never answers).

It parses requests (pyVmomi sends `Content-Length`) and answers (`http.client` reads them, chunked
or not) so a fault hits one request, not a whole keep-alive connection; a reset is a TCP RST
(SO_LINGER 0), what a client sees when a load balancer or vCenter's reverse proxy drops it.

`rule(connection, i, request)` picks the fault of the i-th request on the n-th connection (both
counted from 0; the connection over the proxy's life); `requests` keeps the SOAP method of each,
with its fault, for the test's own assertions.
Only 127.0.0.1 is used.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

PASS = "pass"
RESET_BEFORE = "reset-before"
"""The request never reaches vCenter."""
RESET_AFTER = "reset-after"
"""vCenter ran the request; its answer is lost."""
RESET_MID_ANSWER = "reset-mid-answer"
"""Half the answer arrives, then the connection is reset."""
STALL = "stall"
"""vCenter ran the request; its answer never comes and the connection stays open."""
TRICKLE = "trickle"
"""The answer comes one byte every `trickle_interval_s`."""
BLACK_HOLE = "black-hole"
"""Nothing is forwarded and nothing answered, on this connection and every later one."""

Rule = Callable[[int, int, bytes], str]
_METHOD = re.compile(rb"<(?:\w+:)?Body[^>]*>\s*<(?:\w+:)?(\w+)")


def soap_method(request: bytes) -> str:
    """The SOAP method a request calls (`RetrieveServiceContent`), or its HTTP request line."""
    found = _METHOD.search(request)
    return found.group(1).decode() if found else request.split(b"\r\n", 1)[0].decode(errors="replace")


def every_second_connection(connection: int, i: int, _request: bytes) -> str:
    """Every second connection is reset at its first request, alternately before and after it
    reached vCenter: the login of one session in two meets a reset."""
    if connection % 2 == 0 or i != 0:
        return PASS
    return RESET_BEFORE if connection % 4 == 1 else RESET_AFTER


def random_resets(seed: int, *, within: int = 6) -> Rule:
    """Every second connection, on average, is reset at one of its first `within` requests (a
    login is the first three of a session's connection), alternately
    before and after vCenter saw that request. Which connections and where: drawn from `seed`, so a
    run can be repeated (and no strict alternation: an operation opens its connections in a fixed
    order, and a strict odd/even rule would hit the same one of each attempt every time)."""

    def rule(connection: int, i: int, _request: bytes) -> str:
        draw = random.Random(seed * 100_003 + connection)
        if draw.random() >= 0.5 or i != draw.randrange(within):
            return PASS
        return RESET_BEFORE if draw.random() < 0.5 else RESET_AFTER

    return rule


def on_method(method: str, fault: str, *, times: int = 1, then: str = PASS) -> Rule:
    """`fault` for the first `times` calls of a SOAP method; `then` for every request after the
    first of them (`STALL`: vCenter goes silent from there on)."""
    hits = [0]

    def rule(_connection: int, _i: int, request: bytes) -> str:
        if soap_method(request) == method and hits[0] < times:
            hits[0] += 1
            return fault
        return then if hits[0] else PASS

    return rule


@dataclass
class FaultProxy:
    upstream_port: int
    rule: Rule = field(default=lambda _c, _i, _r: PASS)
    trickle_interval_s: float = 1.0
    requests: list[tuple[str, str]] = field(default_factory=list)
    """(SOAP method, fault) of each request, in order."""

    def __post_init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._connections = 0
        self._black_hole = False
        self._closed = threading.Event()
        self._sockets: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for sock in list(self._sockets):
                _reset(sock)
            self._sockets.clear()

    def swallow_everything(self) -> None:
        """From now on a black hole: connections are taken, nothing is forwarded or answered."""
        self._black_hole = True

    def methods(self) -> list[str]:
        return [method for method, _ in self.requests]

    def faults(self) -> list[str]:
        return [fault for _, fault in self.requests if fault != PASS]

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.add(client)
                n = self._connections
                self._connections += 1
            threading.Thread(target=self._serve, args=(client, n), daemon=True).start()

    def _serve(self, client: socket.socket, connection: int) -> None:
        upstream: socket.socket | None = None
        reader = client.makefile("rb")
        i = -1
        try:
            while not self._closed.is_set():
                if self._black_hole:
                    self._closed.wait()
                    return
                request = _read_request(reader)
                if request is None:
                    return
                i += 1
                fault = self.rule(connection, i, request)
                self.requests.append((soap_method(request), fault))
                if fault == RESET_BEFORE:
                    return
                if fault == BLACK_HOLE:
                    self._black_hole = True
                    self._closed.wait()
                    return
                if upstream is None:
                    upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
                    with self._lock:
                        self._sockets.add(upstream)
                upstream.sendall(request)
                answer = _read_answer(upstream)
                if fault == RESET_AFTER:
                    return
                if fault == STALL:
                    self._closed.wait()
                    return
                if fault == RESET_MID_ANSWER:
                    client.sendall(answer[: len(answer) // 2])
                    return
                if fault == TRICKLE:
                    for byte in answer:
                        client.sendall(bytes([byte]))
                        if self._closed.wait(self.trickle_interval_s):
                            return
                    continue
                client.sendall(answer)
        except OSError:
            return
        finally:
            reader.close()
            _reset(client)
            if upstream is not None:
                upstream.close()


def _reset(sock: socket.socket) -> None:
    """Close with a TCP RST, not a FIN: the peer's next read fails with ECONNRESET."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _read_request(reader: object) -> bytes | None:
    """One HTTP request (headers and a Content-Length body), or None at the end of the stream."""
    lines: list[bytes] = []
    while True:
        line = reader.readline()  # type: ignore[attr-defined]
        if not line:
            return None
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            break
    head = b"".join(lines)
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    body = reader.read(int(length.group(1))) if length else b""  # type: ignore[attr-defined]
    return head + body


def _read_answer(upstream: socket.socket) -> bytes:
    """vCenter's whole answer, re-framed with a Content-Length (its chunks joined)."""
    response = http.client.HTTPResponse(upstream)
    response.begin()
    body = response.read()
    headers = [
        f"{name}: {value}"
        for name, value in response.getheaders()
        if name.lower() not in ("transfer-encoding", "content-length", "connection")
    ]
    head = f"HTTP/1.1 {response.status} {response.reason}\r\n" + "\r\n".join(headers)
    return f"{head}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


def wait_until(condition: Callable[[], bool], timeout_s: float, step_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step_s)
    return condition()
