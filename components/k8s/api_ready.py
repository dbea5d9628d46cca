"""ApiServerReady: a dynamic resource that waits until a new cluster's API server answers /readyz.

The control-plane VMs finish `pulumi up` as soon as vSphere powers them on; kubeadm, image pulls
and Calico take minutes more. Everything that talks to the cluster (the Kubernetes provider in
`cluster_access.py`) depends on this resource, so it starts only once the API server is ready.

It probes `GET https://<host>:<port>/readyz` anonymously, verifying the server against the cluster
CA certificate: kubeadm clusters allow anonymous `/readyz` (the `system:public-info-viewer`
role), so no credential is needed and the only input, the CA certificate, is public. Nothing
secret lands in state.

Lifecycle: `create` waits (bounded by `timeout_seconds`); `read` reports the endpoint it waited
for and does not probe again (readiness was a moment, not a property to drift); changing the
endpoint or the CA replaces it (and so waits again); changing only the timing is an in-place
no-op update; `delete` does nothing, because there is nothing to remove.
"""

from __future__ import annotations

import http.client
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic as dynamic

from components.dynamic_resource import DynamicResource
from components.k8s.node_bootstrap.spec import host_port

DEFAULT_TIMEOUT_SECONDS = 20 * 60
DEFAULT_POLL_INTERVAL_SECONDS = 10
_REQUEST_TIMEOUT_SECONDS = 10

# Inputs whose change means "a different API server": wait again.
_REPLACE_ON = ("host", "port", "ca_certificate_pem")


class ApiServerNotReadyError(Exception):
    """The API server did not answer /readyz with 200 within the timeout."""


@dataclass(frozen=True)
class ProbeResult:
    ready: bool
    detail: str


def probe_readyz(
    host: str, port: int, ca_certificate_pem: str, *, timeout: float = _REQUEST_TIMEOUT_SECONDS
) -> ProbeResult:
    """One anonymous GET of /readyz, the server verified against `ca_certificate_pem`."""
    try:
        context = ssl.create_default_context(cadata=ca_certificate_pem)
    except ssl.SSLError as exc:
        raise ValueError(f"ca_certificate_pem is not a usable PEM certificate: {exc}") from exc
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=timeout)
    try:
        connection.request("GET", "/readyz")
        response = connection.getresponse()
        body = response.read(2048).decode("utf-8", "replace").strip()
    except ssl.SSLCertVerificationError as exc:
        return ProbeResult(False, f"TLS verification against the cluster CA failed: {exc}")
    except (OSError, http.client.HTTPException) as exc:
        # Refused, unreachable, timed out, reset: the VM is still booting or kubeadm still running.
        return ProbeResult(False, f"{type(exc).__name__}: {exc}")
    finally:
        connection.close()
    if response.status == 200:
        return ProbeResult(True, body or "ok")
    if response.status in (401, 403):
        # Transient while the API server creates its bootstrap RBAC policy; permanent if
        # anonymous auth was switched off, which the final error then shows.
        return ProbeResult(False, f"HTTP {response.status} (anonymous access to /readyz refused)")
    first_line = body.splitlines()[0] if body else ""
    return ProbeResult(False, f"HTTP {response.status} {first_line}".strip())


def wait_until_ready(
    host: str,
    port: int,
    ca_certificate_pem: str,
    *,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    poll_interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ProbeResult:
    """Probe until ready or until `timeout_seconds` have passed; raise with the last answer."""
    deadline = clock() + timeout_seconds
    while True:
        result = probe_readyz(host, port, ca_certificate_pem, timeout=min(_REQUEST_TIMEOUT_SECONDS, timeout_seconds))
        if result.ready:
            return result
        remaining = deadline - clock()
        if remaining <= 0:
            raise ApiServerNotReadyError(not_ready_message(host, port, timeout_seconds, result))
        sleep(min(poll_interval_seconds, remaining))


def not_ready_message(host: str, port: int, timeout_seconds: float, last: ProbeResult) -> str:
    minutes = timeout_seconds / 60
    return (
        f"API server at https://{host_port(host, port)} did not become ready within "
        f"{minutes:g} minutes (last answer: {last.detail}); check the control-plane VM console "
        "and `journalctl -u gpucluster-bootstrap`"
    )


def _outputs(props: dict[str, Any]) -> dict[str, Any]:
    host, port = str(props["host"]), int(props["port"])
    return {
        "host": host,
        "port": port,
        "ca_certificate_pem": props["ca_certificate_pem"],
        "timeout_seconds": float(props["timeout_seconds"]),
        "poll_interval_seconds": float(props["poll_interval_seconds"]),
        "url": f"https://{host_port(host, port)}/readyz",
    }


class ApiServerReadyProvider(dynamic.ResourceProvider):
    """Create waits for readiness; the rest is honest bookkeeping (see the module docstring)."""

    # Holds no secrets, so its pickled form need not be encrypted in state.
    serialize_as_secret_always = False

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        outs = _outputs(props)
        wait_until_ready(
            outs["host"],
            outs["port"],
            outs["ca_certificate_pem"],
            timeout_seconds=outs["timeout_seconds"],
            poll_interval_seconds=outs["poll_interval_seconds"],
        )
        return dynamic.CreateResult(id_=host_port(outs["host"], outs["port"]), outs=outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        def differs(key: str) -> bool:
            old, new = olds.get(key), news.get(key)
            if key in ("port", "timeout_seconds", "poll_interval_seconds"):
                return old is None or new is None or float(old) != float(new)
            return bool(old != new)

        replaces = [key for key in _REPLACE_ON if differs(key)]
        changed = replaces + [key for key in ("timeout_seconds", "poll_interval_seconds") if differs(key)]
        return dynamic.DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        # Only the timing changed (anything else replaces): the server was already ready.
        return dynamic.UpdateResult(outs=_outputs(news))

    def read(self, id_: str, props: dict[str, Any]) -> dynamic.ReadResult:
        # Reports the endpoint this resource waited for; readiness is not re-probed on refresh.
        return dynamic.ReadResult(id_=id_, outs=_outputs(props) if props else props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        pulumi.log.debug(f"ApiServerReady {_id}: nothing to delete (a wait leaves nothing behind)")


@dataclass(frozen=True, kw_only=True)
class ApiServerReadyArgs:
    host: str
    """API server host name or IP (the cluster's control-plane endpoint)."""
    ca_certificate_pem: pulumi.Input[str]
    """The cluster CA certificate (public) the API server's certificate must chain to."""
    port: int = 6443
    """API server port. Default 6443."""
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    """How long to wait before failing. Default 1200 (20 minutes: clone, first boot, image
    pulls, kubeadm init)."""
    poll_interval_seconds: int = DEFAULT_POLL_INTERVAL_SECONDS
    """Pause between probes. Default 10."""

    def __post_init__(self) -> None:
        if self.timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be positive, got {self.timeout_seconds}")
        if not 0 < self.poll_interval_seconds <= self.timeout_seconds:
            raise ValueError("poll_interval_seconds must be positive and at most timeout_seconds")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not a TCP port")


class ApiServerReady(DynamicResource, module="kubernetes", name="ApiServerReady"):
    """Exists once the API server at `host:port` answered /readyz; pass the control-plane VMs as
    `depends_on` so the wait starts after they are created."""

    url: pulumi.Output[str]
    """The /readyz URL that answered."""

    def __init__(
        self,
        name: str,
        args: ApiServerReadyArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            ApiServerReadyProvider(),
            name,
            {
                "host": args.host,
                "port": args.port,
                "ca_certificate_pem": args.ca_certificate_pem,
                "timeout_seconds": args.timeout_seconds,
                "poll_interval_seconds": args.poll_interval_seconds,
                "url": None,
            },
            opts,
        )
