"""ApiServerReady against a local HTTPS server on 127.0.0.1 with a throwaway CA."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from components.k8s.api_ready import (
    ApiServerNotReadyError,
    ApiServerReadyArgs,
    ApiServerReadyProvider,
    probe_readyz,
    wait_until_ready,
)

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="the openssl CLI makes the throwaway certificates"
)

LOOPBACK = "127.0.0.1"


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True)
    assert result.returncode == 0, result.stderr.decode()


def _make_ca(directory: Path, name: str) -> None:
    _openssl(
        "req",
        "-x509",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        f"/CN={name}",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.crt",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )


@dataclass
class Pki:
    ca_pem: str
    other_ca_pem: str
    server_cert: Path
    server_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    _make_ca(directory, "ca")
    _make_ca(directory, "other-ca")
    (directory / "server.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage=serverAuth\nsubjectAltName=IP:{LOOPBACK}\n"
    )
    _openssl(
        "req",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=kube-apiserver",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        cwd=directory,
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "server.ext",
        "-out",
        "server.crt",
        cwd=directory,
    )
    return Pki(
        ca_pem=(directory / "ca.crt").read_text(),
        other_ca_pem=(directory / "other-ca.crt").read_text(),
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
    )


@dataclass
class FakeApiServer:
    """Answers /readyz with the next scripted status (the last one repeats)."""

    port: int
    statuses: list[int] = field(default_factory=lambda: [200])
    requests: int = 0
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def next_status(self) -> int:
        index = min(self.requests, len(self.statuses) - 1)
        self.requests += 1
        return self.statuses[index]


@pytest.fixture
def server(pki: Pki) -> Iterator[FakeApiServer]:
    state = FakeApiServer(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server calls it by this name
            state.paths.append(self.path)
            state.headers.append(dict(self.headers.items()))
            status = state.next_status()
            body = b"ok" if status == 200 else b"[-]etcd failed: reason withheld\nreadyz check failed"
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer((LOOPBACK, 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def props(port: int, ca_pem: str, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "host": LOOPBACK,
        "port": port,
        "ca_certificate_pem": ca_pem,
        "timeout_seconds": 5,
        "poll_interval_seconds": 0.05,
    }
    values.update(overrides)
    return values


def test_create_succeeds_once_readyz_answers_ok(server: FakeApiServer, pki: Pki) -> None:
    result = ApiServerReadyProvider().create(props(server.port, pki.ca_pem))
    assert result.id == f"{LOOPBACK}:{server.port}"
    assert result.outs is not None
    assert result.outs["url"] == f"https://{LOOPBACK}:{server.port}/readyz"
    assert server.paths == ["/readyz"]
    assert "Authorization" not in server.headers[0]  # anonymous probe: no credential sent


def test_create_waits_through_not_ready_answers(server: FakeApiServer, pki: Pki) -> None:
    server.statuses = [500, 403, 200]
    ApiServerReadyProvider().create(props(server.port, pki.ca_pem))
    assert server.requests == 3


def test_timeout_names_the_endpoint_the_limit_and_where_to_look(server: FakeApiServer, pki: Pki) -> None:
    server.statuses = [500]
    with pytest.raises(ApiServerNotReadyError) as info:
        wait_until_ready(LOOPBACK, server.port, pki.ca_pem, timeout_seconds=0.6, poll_interval_seconds=0.1)
    message = str(info.value)
    assert f"API server at https://{LOOPBACK}:{server.port} did not become ready within" in message
    assert "0.01 minutes" in message
    assert "HTTP 500 [-]etcd failed" in message
    assert "check the control-plane VM console and `journalctl -u gpucluster-bootstrap`" in message
    assert server.requests >= 2


def test_a_server_the_ca_does_not_vouch_for_is_never_ready(server: FakeApiServer, pki: Pki) -> None:
    result = probe_readyz(LOOPBACK, server.port, pki.other_ca_pem)
    assert not result.ready
    assert "TLS verification against the cluster CA failed" in result.detail


def test_nothing_listening_is_reported_not_raised(pki: Pki, server: FakeApiServer) -> None:
    # A port we just saw in use and then closed is the most reliable "nothing there" on loopback.
    import socket

    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        closed_port = sock.getsockname()[1]
    result = probe_readyz(LOOPBACK, closed_port, pki.ca_pem, timeout=2)
    assert not result.ready
    assert "ConnectionRefusedError" in result.detail


def test_timeout_arithmetic_with_a_fake_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    from components.k8s import api_ready

    now = [0.0]
    sleeps: list[float] = []

    def fake_probe(*_args: Any, **_kwargs: Any) -> api_ready.ProbeResult:
        return api_ready.ProbeResult(False, "ConnectionRefusedError: refused")

    def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(api_ready, "probe_readyz", fake_probe)
    with pytest.raises(ApiServerNotReadyError, match="within 20 minutes"):
        wait_until_ready("10.0.0.10", 6443, "unused", clock=lambda: now[0], sleep=fake_sleep)
    assert sum(sleeps) == pytest.approx(1200)
    assert max(sleeps) == 10


def test_bad_ca_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="ca_certificate_pem is not a usable PEM certificate"):
        probe_readyz(LOOPBACK, 1, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")


# ------------------------------------------------------------------------------------------
# diff / update / read / delete: honest bookkeeping, no network
# ------------------------------------------------------------------------------------------

OLD = {
    "host": "10.0.0.10",
    "port": 6443.0,
    "ca_certificate_pem": "CA-1",
    "timeout_seconds": 1200.0,
    "poll_interval_seconds": 10.0,
    "url": "https://10.0.0.10:6443/readyz",
}


@pytest.mark.parametrize(
    ("change", "changes", "replaces"),
    [
        ({}, False, []),
        ({"port": 6443}, False, []),  # int vs float from the engine is no change
        ({"host": "10.0.0.11"}, True, ["host"]),
        ({"port": 443}, True, ["port"]),
        ({"ca_certificate_pem": "CA-2"}, True, ["ca_certificate_pem"]),
        ({"timeout_seconds": 600}, True, []),
        ({"poll_interval_seconds": 5}, True, []),
    ],
)
def test_diff(change: dict[str, Any], changes: bool, replaces: list[str]) -> None:
    news = {k: v for k, v in {**OLD, **change}.items() if k != "url"}
    diff = ApiServerReadyProvider().diff("10.0.0.10:6443", OLD, news)
    assert diff.changes is changes
    assert diff.replaces == replaces


def test_update_does_not_probe_and_read_reports_the_endpoint() -> None:
    provider = ApiServerReadyProvider()
    news = {**OLD, "timeout_seconds": 60}
    update = provider.update("10.0.0.10:6443", OLD, news)
    assert update.outs is not None and update.outs["timeout_seconds"] == 60
    read = provider.read("10.0.0.10:6443", OLD)
    assert read.id == "10.0.0.10:6443"
    assert read.outs is not None and read.outs["url"] == "https://10.0.0.10:6443/readyz"
    assert provider.delete("10.0.0.10:6443", OLD) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout_seconds": 0}, "timeout_seconds must be positive"),
        ({"poll_interval_seconds": 0}, "poll_interval_seconds"),
        ({"port": 0}, "not a TCP port"),
    ],
)
def test_args_are_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ApiServerReadyArgs(host="10.0.0.10", ca_certificate_pem="x", **kwargs)
