"""A local HTTPS double of kube-apiserver on 127.0.0.1, with a throwaway CA.

It behaves like a kubeadm cluster's API server in the minutes after `kubeadm init` starts it:
anonymous `/readyz`; client certificates verified against the cluster CA, the user and groups
taken from CN and O (the x509 authenticator); every authenticated user may create a
SelfSubjectAccessReview (`system:basic-user`), whose answer says `allowed: true` for `*` only once
the `kubeadm:cluster-admins` ClusterRoleBinding exists; anything refused is a `Status` object, as
the real server writes it. Never kinder than the real thing: it grants nothing before the binding.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from components.k8s.api.probe import ACCESS_REVIEW_PATH, KUBEADM_DONE_PATH
from components.k8s.api.ready import ClientCredentials

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


def make_pki(directory: Path) -> Pki:
    """A throwaway cluster CA, another CA, the API server's certificate and two client ones."""
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
    init_done_after_reviews: int | None = 0
    """kubeadm's addon phase (kube-proxy's DaemonSet) exists once this many reviews were answered
    (None: never, a kubeadm init stuck before its last phases)."""
    requests: int = 0
    reviews: int = 0
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    peers: list[dict[str, Any]] = field(default_factory=list)
    review_bodies: list[dict[str, Any]] = field(default_factory=list)
    bootstrap_tokens: dict[str, list[str]] = field(default_factory=dict)
    """`<id>.<secret>` -> the token's `auth-extra-groups`: the bootstrap-token authenticator
    (user `system:bootstrap:<id>`, groups `system:bootstrappers` plus the extra ones). A token
    removed is one tokencleaner deleted: 401, as for any unknown token."""
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    """kube-system Secrets by name: their `data` (base64 values, as the API stores them)."""
    secret_readers: dict[str, list[str]] = field(default_factory=dict)
    """RBAC: the groups a Role and RoleBinding let `get` each Secret by name (none: nobody)."""
    secret_requests: list[tuple[str, str, int]] = field(default_factory=list)
    """(user, Secret name, status) of every GET of a Secret."""

    def next_status(self) -> int:
        index = min(self.requests, len(self.statuses) - 1)
        self.requests += 1
        return self.statuses[index]

    def admin_group_bound(self) -> bool:
        return self.bind_after_reviews is not None and self.reviews >= self.bind_after_reviews


SECRETS_PATH = "/api/v1/namespaces/kube-system/secrets/"


def bearer_identity(state: FakeApiServer, authorization: str | None) -> tuple[str, list[str]] | None:
    """The bootstrap-token authenticator: None for a token it does not know (401)."""
    token = (authorization or "").removeprefix("Bearer ").strip()
    groups = state.bootstrap_tokens.get(token)
    if groups is None:
        return None
    return f"system:bootstrap:{token.split('.')[0]}", ["system:bootstrappers", *groups, "system:authenticated"]


def identity(peer: dict[str, Any]) -> tuple[str, list[str]]:
    """User and groups of a verified client certificate: CN and every O (x509 authenticator)."""
    names = [pair for rdn in peer.get("subject", ()) for pair in rdn]
    user = next((value for key, value in names if key == "commonName"), "")
    groups = [value for key, value in names if key == "organizationName"]
    return user, [*groups, "system:authenticated"]


@contextlib.contextmanager
def serve(pki: Pki) -> Iterator[FakeApiServer]:
    """The double on a free loopback port, for the length of the block."""
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

        def _get_secret(self, peer: dict[str, Any]) -> None:
            """RBAC before existence, as kube-apiserver: a forbidden user never learns whether it exists."""
            name = self.path.removeprefix(SECRETS_PATH)
            if self.headers.get("Authorization"):
                found = bearer_identity(state, self.headers.get("Authorization"))
                if found is None:
                    state.secret_requests.append(("", name, 401))
                    self._answer(
                        401, json.dumps(_status(401, "Unauthorized", "Unauthorized")).encode(), "application/json"
                    )
                    return
                user, groups = found
            else:
                user, groups = identity(peer) if peer else ("system:anonymous", ["system:unauthenticated"])
            allowed = set(groups) & set(state.secret_readers.get(name, ())) or (
                state.admin_group_bound() and ADMIN_GROUP in groups
            )
            if not allowed:
                state.secret_requests.append((user, name, 403))
                message = (
                    f'secrets "{name}" is forbidden: User "{user}" cannot get resource "secrets" in API group "" '
                    'in the namespace "kube-system"'
                )
                self._answer(403, json.dumps(_status(403, "Forbidden", message)).encode(), "application/json")
                return
            if name not in state.secrets:
                state.secret_requests.append((user, name, 404))
                message = f'secrets "{name}" not found'
                self._answer(404, json.dumps(_status(404, "NotFound", message)).encode(), "application/json")
                return
            state.secret_requests.append((user, name, 200))
            body = {
                "kind": "Secret",
                "apiVersion": "v1",
                "metadata": {"name": name, "namespace": "kube-system"},
                "data": state.secrets[name],
                "type": "Opaque",
            }
            self._answer(200, json.dumps(body).encode(), "application/json")

        def do_GET(self) -> None:  # http.server calls it by this name
            peer = self._record()
            if self.path.startswith(SECRETS_PATH):
                self._get_secret(peer)
                return
            if self.path == KUBEADM_DONE_PATH:
                user, groups = identity(peer) if peer else ("system:anonymous", ["system:unauthenticated"])
                if not (state.admin_group_bound() and ADMIN_GROUP in groups):
                    message = (
                        f'daemonsets.apps "kube-proxy" is forbidden: User "{user}" cannot get resource "daemonsets"'
                    )
                    self._answer(403, json.dumps(_status(403, "Forbidden", message)).encode(), "application/json")
                    return
                done = state.init_done_after_reviews is not None and state.reviews >= state.init_done_after_reviews
                if done:
                    self._answer(
                        200,
                        json.dumps({"kind": "DaemonSet", "metadata": {"name": "kube-proxy"}}).encode(),
                        "application/json",
                    )
                else:
                    message = 'daemonsets.apps "kube-proxy" not found'
                    self._answer(404, json.dumps(_status(404, "NotFound", message)).encode(), "application/json")
                return
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
            user, groups = identity(peer) if peer else ("system:anonymous", ["system:unauthenticated"])
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
