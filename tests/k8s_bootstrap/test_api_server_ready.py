"""ApiServerReady against a local HTTPS double of kube-apiserver on 127.0.0.1 with a throwaway CA.

The double behaves like a kubeadm cluster's API server in the minutes after `kubeadm init`
starts it: anonymous `/readyz`; client certificates verified against the cluster CA, the user and
groups taken from CN and O; every authenticated user may create a SelfSubjectAccessReview
(`system:basic-user`), whose answer says `allowed: true` for `*` only once the
`kubeadm:cluster-admins` ClusterRoleBinding exists; anything refused is a `Status` object, as the
real server writes it.
"""

from __future__ import annotations

import json
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

from components.k8s.api_probe import ACCESS_REVIEW_PATH
from components.k8s.api_ready import (
    ApiServerCredentialsRefusedError,
    ApiServerNotReadyError,
    ApiServerReadyArgs,
    ApiServerReadyProvider,
    ClientCredentials,
    probe_admin_access,
    probe_readyz,
    wait_until_ready,
)

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="the openssl CLI makes the throwaway certificates"
)

LOOPBACK = "127.0.0.1"
ADMIN_GROUP = "kubeadm:cluster-admins"


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True)
    assert result.returncode == 0, result.stderr.decode()


def _make_ca(directory: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-new", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
        "-keyout", f"{name}.key", "-out", f"{name}.crt",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip


def _issue(directory: Path, name: str, subject: str, extensions: str, ca: str = "ca") -> None:
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(
        "req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
        "-keyout", f"{name}.key", "-out", f"{name}.csr",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
        "-days", "1", "-extfile", f"{name}.ext", "-out", f"{name}.crt",
        cwd=directory,
    )  # fmt: skip


@dataclass
class Pki:
    ca_pem: str
    other_ca_pem: str
    server_cert: Path
    server_key: Path
    admin: ClientCredentials
    """CN=kubernetes-admin, O=kubeadm:cluster-admins: what ClusterBootstrap issues."""
    outsider: ClientCredentials
    """A client certificate from a CA the server does not trust."""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    _make_ca(directory, "ca")
    _make_ca(directory, "other-ca")
    _issue(
        directory,
        "server",
        "/CN=kube-apiserver",
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage=serverAuth\nsubjectAltName=IP:{LOOPBACK}\n",
    )
    client_ext = "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"
    _issue(directory, "admin", f"/O={ADMIN_GROUP}/CN=kubernetes-admin", client_ext)
    _issue(directory, "outsider", f"/O={ADMIN_GROUP}/CN=kubernetes-admin", client_ext, ca="other-ca")

    def credentials(name: str) -> ClientCredentials:
        return ClientCredentials(
            certificate_pem=(directory / f"{name}.crt").read_text(), key_pem=(directory / f"{name}.key").read_text()
        )

    return Pki(
        ca_pem=(directory / "ca.crt").read_text(),
        other_ca_pem=(directory / "other-ca.crt").read_text(),
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        admin=credentials("admin"),
        outsider=credentials("outsider"),
    )


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A `Status` object as kube-apiserver writes it for a refused request."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {"group": "authorization.k8s.io", "kind": "selfsubjectaccessreviews"},
        "code": code,
    }


@dataclass
class FakeApiServer:
    """/readyz answers the next scripted status (the last one repeats); the admin group is bound
    to cluster-admin once `bind_after_reviews` access reviews were answered (None: never)."""

    port: int
    statuses: list[int] = field(default_factory=lambda: [200])
    bind_after_reviews: int | None = 0
    rbac_bootstrapped: bool = True
    """False: even `system:basic-user` is missing, so every review is a 403 `Status`."""
    requests: int = 0
    reviews: int = 0
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    peers: list[dict[str, Any]] = field(default_factory=list)
    review_bodies: list[dict[str, Any]] = field(default_factory=list)

    def next_status(self) -> int:
        index = min(self.requests, len(self.statuses) - 1)
        self.requests += 1
        return self.statuses[index]

    def admin_group_bound(self) -> bool:
        return self.bind_after_reviews is not None and self.reviews >= self.bind_after_reviews


def _identity(peer: dict[str, Any]) -> tuple[str, list[str]]:
    """User and groups of a verified client certificate: CN and every O (x509 authenticator)."""
    names = [pair for rdn in peer.get("subject", ()) for pair in rdn]
    user = next((value for key, value in names if key == "commonName"), "")
    groups = [value for key, value in names if key == "organizationName"]
    return user, [*groups, "system:authenticated"]


@pytest.fixture
def server(pki: Pki) -> Iterator[FakeApiServer]:
    state = FakeApiServer(port=0)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _record(self) -> dict[str, Any]:
            peer = self.connection.getpeercert() or {}  # type: ignore[attr-defined]
            state.paths.append(self.path)
            state.headers.append(dict(self.headers.items()))
            state.peers.append(peer)
            return peer

        def do_GET(self) -> None:  # http.server calls it by this name
            self._record()
            status = state.next_status()
            body = b"ok" if status == 200 else b"[-]etcd failed: reason withheld\nreadyz check failed"
            self._answer(status, body, "text/plain")

        def do_POST(self) -> None:  # http.server calls it by this name
            peer = self._record()
            review = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            if self.path != ACCESS_REVIEW_PATH:
                self._answer(
                    404,
                    json.dumps(_status(404, "NotFound", "the server could not find the requested resource")).encode(),
                    "application/json",
                )
                return
            state.review_bodies.append(review)
            user, groups = _identity(peer) if peer else ("system:anonymous", ["system:unauthenticated"])
            if "system:authenticated" not in groups or not state.rbac_bootstrapped:
                message = (
                    f'selfsubjectaccessreviews.authorization.k8s.io is forbidden: User "{user}" cannot create '
                    'resource "selfsubjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope'
                )
                self._answer(403, json.dumps(_status(403, "Forbidden", message)).encode(), "application/json")
                return
            bound = state.admin_group_bound()
            state.reviews += 1
            attributes = review.get("spec", {}).get("resourceAttributes", {})
            wildcard = all(attributes.get(key) == "*" for key in ("verb", "group", "resource"))
            # cluster-admin (verbs/apiGroups/resources "*") is the only rule that grants "*".
            allowed = bound and ADMIN_GROUP in groups and wildcard
            review["status"] = {"allowed": allowed} if allowed else {"allowed": False}
            self._answer(201, json.dumps(review).encode(), "application/json")

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer((LOOPBACK, 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    # Like kube-apiserver: a client certificate is optional (anonymous /readyz), and one that is
    # presented must chain to the cluster CA.
    context.verify_mode = ssl.CERT_OPTIONAL
    context.load_verify_locations(cadata=pki.ca_pem)
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


def props(port: int, pki: Pki, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "host": LOOPBACK,
        "port": port,
        "ca_certificate_pem": pki.ca_pem,
        "client_certificate_pem": pki.admin.certificate_pem,
        "client_key_pem": pki.admin.key_pem,
        "timeout_seconds": 5,
        "poll_interval_seconds": 0.05,
    }
    values.update(overrides)
    return values


def test_create_succeeds_once_readyz_answers_and_the_admin_is_authorised(server: FakeApiServer, pki: Pki) -> None:
    result = ApiServerReadyProvider().create(props(server.port, pki))
    assert result.id == f"{LOOPBACK}:{server.port}"
    assert result.outs is not None
    assert result.outs["url"] == f"https://{LOOPBACK}:{server.port}/readyz"
    assert server.paths == ["/readyz", ACCESS_REVIEW_PATH]
    assert "Authorization" not in server.headers[0]
    assert server.peers[0] == {}  # /readyz is probed anonymously: no client certificate
    assert _identity(server.peers[1]) == ("kubernetes-admin", [ADMIN_GROUP, "system:authenticated"])
    assert server.review_bodies[0]["kind"] == "SelfSubjectAccessReview"
    assert server.review_bodies[0]["spec"] == {"resourceAttributes": {"verb": "*", "group": "*", "resource": "*"}}


def test_ready_waits_until_kubeadm_binds_the_admin_group(server: FakeApiServer, pki: Pki) -> None:
    """Defect 13.6: /readyz says 200 while kubeadm has not yet created the kubeadm:cluster-admins
    binding; ready must wait for it (the old probe declared ready at the first 200)."""
    server.bind_after_reviews = 3
    ApiServerReadyProvider().create(props(server.port, pki))
    assert server.reviews == 4  # three refusals, then allowed
    assert server.admin_group_bound()


def test_credentials_never_authorised_is_a_refusal_not_a_timeout(server: FakeApiServer, pki: Pki) -> None:
    server.bind_after_reviews = None
    with pytest.raises(ApiServerCredentialsRefusedError) as info:
        wait_until_ready(
            LOOPBACK, server.port, pki.ca_pem, credentials=pki.admin, timeout_seconds=0.6, poll_interval_seconds=0.1
        )
    message = str(info.value)
    assert f"API server at https://{LOOPBACK}:{server.port} answered /readyz but refused" in message
    assert "SelfSubjectAccessReview for '*' not allowed" in message
    assert "clusterrolebinding kubeadm:cluster-admins" in message
    assert server.reviews >= 2


def test_a_forbidden_status_is_a_refusal_with_the_servers_message(server: FakeApiServer, pki: Pki) -> None:
    server.rbac_bootstrapped = False
    result = probe_admin_access(LOOPBACK, server.port, pki.ca_pem, pki.admin)
    assert not result.ready and result.stage == "refused"
    assert result.detail.startswith("HTTP 403: selfsubjectaccessreviews.authorization.k8s.io is forbidden")
    assert 'User "kubernetes-admin"' in result.detail


def test_a_certificate_from_another_ca_is_never_authorised(server: FakeApiServer, pki: Pki) -> None:
    result = probe_admin_access(LOOPBACK, server.port, pki.ca_pem, pki.outsider, timeout=2)
    assert not result.ready
    assert server.reviews == 0


def test_create_waits_through_not_ready_answers(server: FakeApiServer, pki: Pki) -> None:
    server.statuses = [500, 403, 200]
    ApiServerReadyProvider().create(props(server.port, pki))
    assert server.requests == 3
    assert server.reviews == 1  # the access review only once /readyz said 200


def test_never_answered_names_the_endpoint_the_limit_and_where_to_look(server: FakeApiServer, pki: Pki) -> None:
    server.statuses = [500]
    with pytest.raises(ApiServerNotReadyError) as info:
        wait_until_ready(
            LOOPBACK, server.port, pki.ca_pem, credentials=pki.admin, timeout_seconds=0.6, poll_interval_seconds=0.1
        )
    assert not isinstance(info.value, ApiServerCredentialsRefusedError)
    message = str(info.value)
    assert f"API server at https://{LOOPBACK}:{server.port} did not become ready within" in message
    assert "0.01 minutes" in message
    assert "HTTP 500 [-]etcd failed" in message
    assert "check the control-plane VM console and `journalctl -u gpucluster-bootstrap`" in message
    assert server.requests >= 2
    assert server.reviews == 0


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
    assert result.stage == "unreachable"
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

    monkeypatch.setattr(api_ready, "probe_api_server", fake_probe)
    with pytest.raises(ApiServerNotReadyError, match="within 20 minutes"):
        wait_until_ready(
            "10.0.0.10",
            6443,
            "unused",
            credentials=ClientCredentials(certificate_pem="c", key_pem="k"),
            clock=lambda: now[0],
            sleep=fake_sleep,
        )
    assert sum(sleeps) == pytest.approx(1200)
    assert max(sleeps) == 10


def test_bad_ca_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="ca_certificate_pem is not a usable PEM certificate"):
        probe_readyz(LOOPBACK, 1, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")


def test_bad_client_credentials_are_a_clear_error_without_the_key(pki: Pki) -> None:
    broken = ClientCredentials(certificate_pem=pki.admin.certificate_pem, key_pem="not a key SECRET-MATERIAL")
    with pytest.raises(ValueError, match="admin client certificate or key is not usable") as info:
        probe_admin_access(LOOPBACK, 1, pki.ca_pem, broken)
    assert "SECRET-MATERIAL" not in str(info.value)
    assert "SECRET-MATERIAL" not in repr(broken)


# ------------------------------------------------------------------------------------------
# diff / update / read / delete: honest bookkeeping, no network
# ------------------------------------------------------------------------------------------

OLD = {
    "host": "10.0.0.10",
    "port": 6443.0,
    "ca_certificate_pem": "CA-1",
    "client_certificate_pem": "CERT-1",
    "client_key_pem": "KEY-1",
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
        # The yearly admin certificate renewal: check the new one is authorised too.
        ({"client_certificate_pem": "CERT-2"}, True, ["client_certificate_pem"]),
        ({"client_key_pem": "KEY-2"}, True, ["client_key_pem"]),
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
        ApiServerReadyArgs(
            host="10.0.0.10", ca_certificate_pem="x", client_certificate_pem="c", client_key_pem="k", **kwargs
        )
