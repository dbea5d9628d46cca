"""A small Kubernetes API client for our resource handlers: JSON over HTTPS with a kubeconfig's
credentials, standard library only.

The providers run inside Pulumi's Python provider host, where the `kubernetes` client library is
not a dependency we want (it pulls in a large tree for four calls). The kubeconfig is the one this
stack builds (embedded CA, client certificate and key) or a user's (a bearer token works too).
The client key is written to a private temporary file only for the moment `ssl` loads it.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import yaml

REQUEST_TIMEOUT_SECONDS = 15


class KubeconfigError(ValueError):
    """The kubeconfig lacks what a connection needs (it never says what the secrets are)."""


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any]

    @property
    def message(self) -> str:
        """The `Status.message` the API server sends with an error."""
        return str(self.body.get("message", "")) if isinstance(self.body, dict) else ""


class KubeApi:
    """`request(method, path, body)` against the current context's cluster."""

    def __init__(self, kubeconfig: str, *, timeout: float = REQUEST_TIMEOUT_SECONDS) -> None:
        try:
            config = yaml.safe_load(kubeconfig) or {}
            context_name = config.get("current-context")
            context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
            cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
            user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        except (yaml.YAMLError, KeyError, StopIteration, TypeError, AttributeError):
            raise KubeconfigError("the kubeconfig has no usable current context, cluster and user") from None
        self.server = str(cluster["server"]).rstrip("/")
        self.timeout = timeout
        self._token = user.get("token")
        self._context = self._ssl_context(cluster, user) if self.server.startswith("https://") else None

    @staticmethod
    def _ssl_context(cluster: dict[str, Any], user: dict[str, Any]) -> ssl.SSLContext:
        if cluster.get("certificate-authority-data"):
            context = ssl.create_default_context(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
            )
        elif cluster.get("insecure-skip-tls-verify"):
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = ssl.create_default_context()
        if user.get("client-certificate-data") and user.get("client-key-data"):
            with tempfile.TemporaryDirectory() as folder:
                cert, key = os.path.join(folder, "client.crt"), os.path.join(folder, "client.key")
                for path, field in ((cert, "client-certificate-data"), (key, "client-key-data")):
                    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(descriptor, "wb") as out:
                        out.write(base64.b64decode(user[field]))
                context.load_cert_chain(cert, key)
        return context

    def request(self, method: str, path: str, body: dict[str, Any] | None = None, *, patch: bool = False) -> Response:
        """One call; HTTP errors come back as a `Response`, unreachable servers raise OSError."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/merge-patch+json" if patch else "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        request = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._context) as answer:
                return Response(answer.status, _json(answer.read()))
        except urllib.error.HTTPError as error:
            return Response(error.code, _json(error.read()))


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw or b"{}")
    except ValueError:
        return {"message": raw[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"items": value}


def quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")
