"""Fault text and classification (components/vcenter/faults.py) and the per-operation deadline
(components/vcenter/deadline.py), without a vCenter: pyVmomi's own fault classes, and a loopback
socket that answers one byte at a time."""

from __future__ import annotations

import http.client
import http.server
import socket
import threading
import time
from collections.abc import Iterator
from xml.parsers.expat import ExpatError

import pytest
from pyVmomi import vim

from components.vcenter.deadline import BoundedHTTPConnection, DeadlineExceeded, operation_deadline
from components.vcenter.faults import fault_text, is_transient
from components.vcenter.session import PooledStub


def _bulk_fault() -> vim.fault.DvsOperationBulkFault:
    on_host = vim.fault.DvsOperationBulkFault.FaultOnHost(
        host=vim.HostSystem("host-12"), fault=vim.fault.NotFound(msg="physical NIC vmnic9 not found on host esxi-02")
    )
    return vim.fault.DvsOperationBulkFault(
        msg="Cannot complete a vSphere Distributed Switch operation for one or more host members.",
        hostFault=[on_host],
    )


def test_a_bulk_fault_names_the_host_at_fault_and_its_own_reason() -> None:
    """Issue 43 item 5: the batch's error said only the bulk text, for every host of the batch."""
    text = fault_text(_bulk_fault(), {"host-12": "esxi-02"})

    assert text == (
        "DvsOperationBulkFault: Cannot complete a vSphere Distributed Switch operation for one or more host "
        "members. (host esxi-02: NotFound: physical NIC vmnic9 not found on host esxi-02)"
    )
    assert "host host-12: NotFound" in fault_text(_bulk_fault())  # without names: the managed object id


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ConnectionResetError(104, "Connection reset by peer"), True),
        (ExpatError("no element found: line 1, column 0"), True),  # an answer cut off half way
        (DeadlineExceeded("the operation's 3s bound passed"), True),
        (vim.fault.InvalidLogin(), False),
        (_bulk_fault(), False),  # a host's own reason: a retry meets it again (issue 43 item 4)
    ],
)
def test_which_errors_are_worth_a_retry(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


@pytest.fixture
def trickling_server() -> Iterator[int]:
    """An HTTP server on 127.0.0.1 that sends its answer one byte every 0.1 s (never finishing
    within the test: 10,000 bytes)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        client, _ = listener.accept()
        client.recv(65536)
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n" + b"x" * 10000
        for byte in answer:
            if stop.wait(0.1):
                break
            try:
                client.sendall(bytes([byte]))
            except OSError:
                break
        client.close()

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    stop.set()
    listener.close()


def test_a_trickling_answer_is_cut_off_at_the_operations_deadline(trickling_server: int) -> None:
    """Issue 43 item 7: each read got 60 s, so an answer trickling a byte at a time held the call
    for as long as it trickled. Every read here returns within its 5 s socket timeout."""
    connection = BoundedHTTPConnection("127.0.0.1", trickling_server, timeout=5)
    started = time.monotonic()
    with operation_deadline(1.0), pytest.raises(http.client.HTTPException):  # cut short: the watchdog shut the socket
        connection.request("GET", "/")
        connection.getresponse().read()
    assert time.monotonic() - started < 1.5
    with operation_deadline(1.0) as deadline:
        time.sleep(1.05)
        with pytest.raises(DeadlineExceeded):
            connection.request("GET", "/")  # no request starts past the deadline
        assert deadline.expired


@pytest.fixture
def slow_path_server() -> Iterator[int]:
    """A keep-alive HTTP/1.1 server on 127.0.0.1: `/slow` answers after 1.5 s, anything else at once."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # the handler's method name
            if self.path == "/slow":
                time.sleep(1.5)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _get(stub: PooledStub, path: str) -> bytes:
    """One request as pyVmomi's InvokeMethod makes it: a connection from the pool, back after the answer."""
    connection = stub.GetConnection()
    connection.request("GET", path)
    body = connection.getresponse().read()
    stub.ReturnConnection(connection)
    return bytes(body)


def test_a_deadline_shuts_no_connection_another_operation_took_from_the_pool(slow_path_server: int) -> None:
    """Issue 51 item 5, without a simulator: A's deadline passes while A still runs; B, on the
    connection A used before (pyVmomi's pool, SoapAdapter.py), is in a 1.5 s call. Old code: A's
    deadline shut B's socket (http.client.RemoteDisconnected)."""
    stub = PooledStub("127.0.0.1", -slow_path_server, version="vim.version.version8", httpConnectionTimeout=5)
    stub.scheme = BoundedHTTPConnection
    a_called, b_done = threading.Event(), threading.Event()

    def operation_a() -> None:
        with operation_deadline(0.5):
            _get(stub, "/fast")
            a_called.set()
            b_done.wait(5)  # A runs on past its deadline, its connection now B's

    a = threading.Thread(target=operation_a)
    a.start()
    assert a_called.wait(5)
    with operation_deadline(30):
        answer = _get(stub, "/slow")  # the one pooled connection: A's
    b_done.set()
    a.join(5)
    assert answer == b"ok"
    with operation_deadline(30):  # and the connection back in the pool since is whole
        assert _get(stub, "/fast") == b"ok"
