"""One look at a new cluster's API server: does it answer, and does it authorise our admin?

Two requests, in this order, each verified against the cluster CA:

1. `GET /readyz`, anonymous (kubeadm clusters let anyone read it: `system:public-info-viewer`).
   It says the server answers and its post-start hooks ran. It says nothing about our
   credentials.
2. `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews` with the admin client
   certificate, asking "may I do any verb on any resource in any group?" (what `cluster-admin`
   grants). Our certificate's organisation is `kubeadm:cluster-admins`, a group that is only
   an admin once `kubeadm init` has created the ClusterRoleBinding of the same name, which it does
   with `super-admin.conf` AFTER the server is up (kubeadm >= 1.29,
   cmd/kubeadm/app/phases/kubeconfig/kubeconfig.go, `EnsureAdminClusterRoleBindingImpl`: it
   first tries with admin.conf, treats Forbidden as "binding still missing", then creates it as
   the super admin). Between the two, `/readyz` says 200 and every request of ours is refused, so
   "ready" means the review says `allowed: true`.

Every authenticated user may create a SelfSubjectAccessReview (the `system:basic-user`
ClusterRole, part of the bootstrap policy that `/readyz` waits for), so before the binding exists
the answer is `201` with `allowed: false`, not an error; a `403` `Status` (RBAC not bootstrapped
yet, or `system:basic-user` removed) and a `401` (a certificate the server does not trust) are
refusals too. Each outcome keeps its stage so the caller can tell "never answered" from
"answered but refused our credentials".
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

REQUEST_TIMEOUT_SECONDS = 10

ACCESS_REVIEW_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
"""Where a client asks the authoriser about itself (authorization.k8s.io/v1)."""

ADMIN_ACCESS_REVIEW: dict[str, Any] = {
    "apiVersion": "authorization.k8s.io/v1",
    "kind": "SelfSubjectAccessReview",
    # "*" everywhere: RBAC allows it only through a rule with verbs, apiGroups and resources "*",
    # i.e. the `cluster-admin` ClusterRole our group is bound to. Anything less would let a
    # half-privileged credential through, and the first apply would fail on what it lacks.
    "spec": {"resourceAttributes": {"verb": "*", "group": "*", "resource": "*"}},
}

Stage = Literal["unreachable", "not-ready", "refused", "initialising", "ready"]
"""unreachable: no HTTP answer (booting, refused, TLS failure); not-ready: /readyz is not 200;
refused: the server answers but does not (yet) authorise our admin credentials; initialising: it
does, but `kubeadm init` has not finished; ready: it has."""

KUBEADM_DONE_PATH = "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy"
"""Evidence that `kubeadm init` has finished: its last phase (`addon`) creates kube-proxy, after
`bootstrap-token` wrote the join token's Secret (kubeadm's init phase order: ... mark-control-plane,
bootstrap-token, kubelet-finalize, addon). Applying before that races kubeadm: it would create or
overwrite the very Secret the stack takes over (`JoinToken`)."""


@dataclass(frozen=True)
class ProbeResult:
    ready: bool
    detail: str
    stage: Stage = "unreachable"


@dataclass(frozen=True, kw_only=True)
class ClientCredentials:
    """The admin client certificate and its key (PEM). The key is a secret: never log it."""

    certificate_pem: str
    key_pem: str

    def __repr__(self) -> str:
        return "ClientCredentials(certificate_pem=..., key_pem=[secret])"


def _context(ca_certificate_pem: str) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cadata=ca_certificate_pem)
    except ssl.SSLError as exc:
        raise ValueError(f"ca_certificate_pem is not a usable PEM certificate: {exc}") from exc


def _load_client_certificate(context: ssl.SSLContext, credentials: ClientCredentials) -> None:
    """`load_cert_chain` reads files only: write both PEMs to a private temporary folder (0700,
    files 0600) that is gone as soon as they are loaded."""
    with tempfile.TemporaryDirectory(prefix="gpucluster-admin-") as folder:
        paths = []
        for name, pem in (("client.crt", credentials.certificate_pem), ("client.key", credentials.key_pem)):
            path = Path(folder) / name
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                handle.write(pem)
            paths.append(path)
        try:
            context.load_cert_chain(paths[0], paths[1])
        except ssl.SSLError as exc:
            raise ValueError(f"the admin client certificate or key is not usable: {exc.reason}") from exc


def _request(
    host: str,
    port: int,
    context: ssl.SSLContext,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    timeout: float,
) -> tuple[int, str] | ProbeResult:
    """(status, body) of one request, or the `unreachable` result saying why there was none."""
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=timeout)
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read(8192).decode("utf-8", "replace").strip()
    except ssl.SSLCertVerificationError as exc:
        return ProbeResult(False, f"TLS verification against the cluster CA failed: {exc}", "unreachable")
    except (OSError, http.client.HTTPException) as exc:
        # Refused, unreachable, timed out, reset: the VM is still booting or kubeadm still running.
        return ProbeResult(False, f"{type(exc).__name__}: {exc}", "unreachable")
    finally:
        connection.close()


def probe_readyz(
    host: str, port: int, ca_certificate_pem: str, *, timeout: float = REQUEST_TIMEOUT_SECONDS
) -> ProbeResult:
    """One anonymous GET of /readyz, the server verified against `ca_certificate_pem`."""
    answer = _request(host, port, _context(ca_certificate_pem), "GET", "/readyz", timeout=timeout)
    if isinstance(answer, ProbeResult):
        return answer
    status, body = answer
    if status == 200:
        return ProbeResult(True, body or "ok", "ready")
    if status in (401, 403):
        # Transient while the API server creates its bootstrap RBAC policy; permanent if
        # anonymous auth was switched off, which the final error then shows.
        return ProbeResult(False, f"HTTP {status} (anonymous access to /readyz refused)", "not-ready")
    first_line = body.splitlines()[0] if body else ""
    return ProbeResult(False, f"HTTP {status} {first_line}".strip(), "not-ready")


def _status_message(body: str) -> str:
    """The `message` of a Kubernetes `Status` body, else the body's first line."""
    try:
        document = json.loads(body)
    except ValueError:
        return body.splitlines()[0] if body else ""
    if isinstance(document, dict) and document.get("kind") == "Status":
        return str(document.get("message", ""))
    return body.splitlines()[0] if body else ""


def _as_admin(
    host: str,
    port: int,
    ca_certificate_pem: str,
    credentials: ClientCredentials,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    timeout: float,
) -> tuple[int, str] | ProbeResult:
    """One request with the admin client certificate, the server verified against the cluster CA."""
    context = _context(ca_certificate_pem)
    _load_client_certificate(context, credentials)
    return _request(host, port, context, method, path, body=body, timeout=timeout)


def probe_admin_access(
    host: str,
    port: int,
    ca_certificate_pem: str,
    credentials: ClientCredentials,
    *,
    timeout: float = REQUEST_TIMEOUT_SECONDS,
) -> ProbeResult:
    """One SelfSubjectAccessReview with the admin client certificate: `ready` only if allowed."""
    body = json.dumps(ADMIN_ACCESS_REVIEW).encode()
    answer = _as_admin(
        host, port, ca_certificate_pem, credentials, "POST", ACCESS_REVIEW_PATH, body=body, timeout=timeout
    )
    if isinstance(answer, ProbeResult):
        return answer
    status, text = answer
    if status in (200, 201):
        try:
            review = json.loads(text)
        except ValueError:
            return ProbeResult(False, f"HTTP {status} with a body that is not JSON", "not-ready")
        verdict = review.get("status", {}) if isinstance(review, dict) else {}
        if verdict.get("allowed") is True:
            return ProbeResult(True, "admin credentials authorised (SelfSubjectAccessReview allowed)", "ready")
        why = verdict.get("reason") or verdict.get("evaluationError") or "no RBAC rule grants it"
        return ProbeResult(False, f"SelfSubjectAccessReview for '*' not allowed: {why}", "refused")
    if status == 401:
        return ProbeResult(
            False,
            "HTTP 401: the API server does not accept the admin client certificate "
            f"({_status_message(text) or 'Unauthorized'})",
            "refused",
        )
    if status == 403:
        return ProbeResult(False, f"HTTP 403: {_status_message(text) or 'Forbidden'}", "refused")
    return ProbeResult(False, f"HTTP {status} {_status_message(text)}".strip(), "not-ready")


def probe_api_server(
    host: str,
    port: int,
    ca_certificate_pem: str,
    credentials: ClientCredentials,
    *,
    timeout: float = REQUEST_TIMEOUT_SECONDS,
) -> ProbeResult:
    """/readyz first (cheap, anonymous), then the access review once the server is ready, then
    whether `kubeadm init` has finished (`KUBEADM_DONE_PATH`)."""
    readyz = probe_readyz(host, port, ca_certificate_pem, timeout=timeout)
    if not readyz.ready:
        return readyz
    access = probe_admin_access(host, port, ca_certificate_pem, credentials, timeout=timeout)
    if not access.ready:
        return access
    return probe_kubeadm_done(host, port, ca_certificate_pem, credentials, timeout=timeout)


def probe_kubeadm_done(
    host: str,
    port: int,
    ca_certificate_pem: str,
    credentials: ClientCredentials,
    *,
    timeout: float = REQUEST_TIMEOUT_SECONDS,
) -> ProbeResult:
    """`ready` once kube-proxy's DaemonSet exists (kubeadm init's last phase ran)."""
    answer = _as_admin(host, port, ca_certificate_pem, credentials, "GET", KUBEADM_DONE_PATH, timeout=timeout)
    if isinstance(answer, ProbeResult):
        return answer
    status, text = answer
    if status == 200:
        return ProbeResult(True, "admin credentials authorised and kubeadm init finished", "ready")
    if status == 404:
        return ProbeResult(
            False,
            "kubeadm init has not finished (no kube-proxy DaemonSet yet: its addon phase has not run)",
            "initialising",
        )
    return ProbeResult(False, f"HTTP {status} {_status_message(text)}".strip(), "not-ready")
