"""A small client of etcd's v3 JSON gateway: member list, member remove, member status.

kubeadm runs stacked etcd on every control-plane node with `--listen-client-urls=
https://127.0.0.1:2379,https://<advertiseAddress>:2379`, `--client-cert-auth=true` and
`--trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt` (kubernetes cmd/kubeadm/app/phases/etcd/
local.go, `getEtcdCommand`), and the server certificate it issues from the etcd CA names the node's
address. etcd serves its gRPC API as JSON on the same port through grpc-gateway (`--enable-grpc-gateway`,
on by default when etcd is configured by flags, as kubeadm's static pod does; only a config file
leaves it off unless set; etcd server/embed/serve.go registers the Cluster and Maintenance handlers
under `/v3/`), so Python's standard library can talk to it with the etcd CA and a client
certificate signed by it. The routes are the `google.api.http` options of api/etcdserverpb/rpc.proto:

    POST /v3/cluster/member/list     MemberListRequest   -> {"members": [Member...]}
    POST /v3/cluster/member/remove   {"ID": "<uint64>"}  -> {"members": [...]}
    POST /v3/maintenance/status      {}                  -> StatusResponse

The gateway marshals with `JSONPb{OrigName: true}` (grpc-gateway v1 runtime's default marshaler):
proto field names as written (`ID`, `peerURLs`, `clientURLs`, `isLearner`), 64-bit integers as
decimal strings (the proto3 JSON mapping), zero values left out (a `Status` without a leader has no
`leader` key, a voting member no `isLearner`). Errors come back with the HTTP status of the gRPC
code (NotFound 404, FailedPrecondition 400, Unavailable 503) and a body
`{"error": msg, "code": grpc_code, "message": msg}` (grpc-gateway runtime `DefaultHTTPError`),
e.g. 404 `etcdserver: member not found` (api/v3rpc/rpctypes/error.go).
"""

from __future__ import annotations

import json
import os
import ssl
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol

CLIENT_PORT = 2379
PEER_PORT = 2380
REQUEST_TIMEOUT_SECONDS = 10.0
MEMBER_LIST = "/v3/cluster/member/list"
MEMBER_REMOVE = "/v3/cluster/member/remove"
MEMBER_STATUS = "/v3/maintenance/status"


@dataclass(frozen=True)
class GatewayResponse:
    status: int
    body: dict[str, Any]

    @property
    def message(self) -> str:
        """The gRPC status message the gateway sends with an error."""
        return str(self.body.get("message") or self.body.get("error") or "")


class Gateway(Protocol):
    def post(self, endpoint: str, path: str, body: dict[str, Any]) -> GatewayResponse:
        """One call to `endpoint` (`https://host:port`); raises OSError when it cannot be reached."""
        ...


@dataclass(frozen=True)
class Member:
    id: int
    name: str
    """Empty for a member that was added but never started (kubeadm names it after the node)."""
    peer_urls: tuple[str, ...]
    client_urls: tuple[str, ...]
    is_learner: bool

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Member:
        return cls(
            id=int(raw["ID"]),  # a uint64 as a decimal string
            name=str(raw.get("name", "")),
            peer_urls=tuple(raw.get("peerURLs", ())),
            client_urls=tuple(raw.get("clientURLs", ())),
            is_learner=bool(raw.get("isLearner", False)),
        )

    @property
    def label(self) -> str:
        return f"{self.name or '(unstarted)'} ({self.id:x})"


def client_url(host: str, port: int = CLIENT_PORT) -> str:
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def peer_url(host: str) -> str:
    """What kubeadm advertises as the member's peer URL (`GetPeerURL`: https, port 2380)."""
    return client_url(host, PEER_PORT)


class EtcdGateway:
    """`post(endpoint, path, body)` with the etcd CA and a client certificate, over HTTPS."""

    def __init__(self, ca_pem: str, cert_pem: str, key_pem: str, *, timeout: float = REQUEST_TIMEOUT_SECONDS) -> None:
        self.timeout = timeout
        # Hostname checking stays on: kubeadm's etcd server certificate names the node's address.
        self._context = ssl.create_default_context(cadata=ca_pem)
        with tempfile.TemporaryDirectory() as folder:  # ssl loads keys from files only
            cert, key = os.path.join(folder, "client.crt"), os.path.join(folder, "client.key")
            for path, text in ((cert, cert_pem), (key, key_pem)):
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(descriptor, "w") as out:
                    out.write(text)
            self._context.load_cert_chain(cert, key)

    def post(self, endpoint: str, path: str, body: dict[str, Any]) -> GatewayResponse:
        request = urllib.request.Request(
            endpoint.rstrip("/") + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._context) as answer:
                return GatewayResponse(answer.status, _json(answer.read()))
        except urllib.error.HTTPError as error:
            return GatewayResponse(error.code, _json(error.read()))


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw or b"{}")
    except ValueError:
        return {"message": raw[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"message": str(value)[:200]}
