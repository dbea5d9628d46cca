"""ApiServerReady: a resource of ours (gpucluster plugin) that waits until a new cluster's API server authorises our
admin credentials.

The control-plane VMs finish `pulumi up` as soon as vSphere powers them on; kubeadm, image pulls
and Calico take minutes more. Everything that talks to the cluster (the Kubernetes provider in
`cluster_access.py`) depends on this resource, so it starts only once the API server is ready
for US: `/readyz` answering is not enough, because kubeadm creates the `kubeadm:cluster-admins`
ClusterRoleBinding our admin certificate relies on only after the server is up, and an apply in
between is refused with 403 (`api_probe.py` has the details and the kubeadm source).

Each probe is an anonymous `GET /readyz` and then, once that says 200, a SelfSubjectAccessReview
with the admin client certificate that must come back `allowed: true`; both verify the server
against the cluster CA. Both steps are retried within one bounded wait. The final error says
which it was: "never answered" (VM, kubeadm or network) or "answered but refused our
credentials" (the binding, or a certificate the cluster does not trust).

Inputs: the endpoint, the CA certificate (public) and the admin client certificate and key. The
key is a secret input and a secret output (`additional_secret_outputs`), so it is encrypted in
state like the kubeconfig that holds the same key; the provider holds no secret.

Lifecycle: `create` waits (bounded by `timeout_seconds`); `read` reports what it waited for and
does not probe again (readiness was a moment, not a property to drift); changing the endpoint,
the CA or the admin credentials (the yearly certificate renewal) replaces it, and so checks the
new ones; changing only the timing is an in-place no-op update; `delete` does nothing, because
there is nothing to remove.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.k8s.api.probe import (
    REQUEST_TIMEOUT_SECONDS,
    ClientCredentials,
    ProbeResult,
    probe_admin_access,
    probe_api_server,
    probe_readyz,
)
from components.k8s.node_bootstrap.spec import host_port

__all__ = [
    "ApiServerCredentialsRefusedError",
    "ApiServerNotReadyError",
    "ApiServerReady",
    "ApiServerReadyArgs",
    "ApiServerReadyProvider",
    "ClientCredentials",
    "ProbeResult",
    "probe_admin_access",
    "probe_api_server",
    "probe_readyz",
    "wait_until_ready",
]

DEFAULT_TIMEOUT_SECONDS = 20 * 60
DEFAULT_POLL_INTERVAL_SECONDS = 10

# Inputs whose change means "a different API server or other credentials": wait again.
_REPLACE_ON = ("host", "port", "ca_certificate_pem", "client_certificate_pem", "client_key_pem")
_SECRET_OUTPUTS = ["client_key_pem"]


class ApiServerNotReadyError(Exception):
    """The API server did not answer /readyz with 200 within the timeout."""


class ApiServerCredentialsRefusedError(ApiServerNotReadyError):
    """The API server answered, but never authorised the admin credentials within the timeout."""


def wait_until_ready(
    host: str,
    port: int,
    ca_certificate_pem: str,
    *,
    credentials: ClientCredentials,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    poll_interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ProbeResult:
    """Probe until our admin is authorised or `timeout_seconds` have passed; raise with the last
    answer, as `ApiServerCredentialsRefusedError` when the server answered but refused us."""
    deadline = clock() + timeout_seconds
    while True:
        result = probe_api_server(
            host, port, ca_certificate_pem, credentials, timeout=min(REQUEST_TIMEOUT_SECONDS, timeout_seconds)
        )
        if result.ready:
            return result
        remaining = deadline - clock()
        if remaining <= 0:
            if result.stage == "refused":
                raise ApiServerCredentialsRefusedError(refused_message(host, port, timeout_seconds, result))
            raise ApiServerNotReadyError(not_ready_message(host, port, timeout_seconds, result))
        sleep(min(poll_interval_seconds, remaining))


def not_ready_message(host: str, port: int, timeout_seconds: float, last: ProbeResult) -> str:
    minutes = timeout_seconds / 60
    return (
        f"API server at https://{host_port(host, port)} did not become ready within "
        f"{minutes:g} minutes (last answer: {last.detail}); check the control-plane VM console "
        "and `journalctl -u gpucluster-bootstrap`"
    )


def refused_message(host: str, port: int, timeout_seconds: float, last: ProbeResult) -> str:
    minutes = timeout_seconds / 60
    return (
        f"API server at https://{host_port(host, port)} answered /readyz but refused the stack's "
        f"admin credentials for {minutes:g} minutes (last answer: {last.detail}). kubeadm binds "
        "the group kubeadm:cluster-admins to cluster-admin after the API server starts: on the "
        "first control-plane node check `kubectl --kubeconfig /etc/kubernetes/super-admin.conf "
        "get clusterrolebinding kubeadm:cluster-admins` and `journalctl -u gpucluster-bootstrap`; "
        "an HTTP 401 means the server's CA is not the stack's"
    )


def _outputs(props: dict[str, Any]) -> dict[str, Any]:
    host, port = str(props["host"]), int(props["port"])
    return {
        "host": host,
        "port": port,
        "ca_certificate_pem": props["ca_certificate_pem"],
        "client_certificate_pem": props["client_certificate_pem"],
        "client_key_pem": props["client_key_pem"],
        "timeout_seconds": float(props["timeout_seconds"]),
        "poll_interval_seconds": float(props["poll_interval_seconds"]),
        "url": f"https://{host_port(host, port)}/readyz",
    }


class ApiServerReadyProvider(handlers.ResourceHandlers):
    """Create waits for readiness; the rest is honest bookkeeping (see the module docstring)."""

    # Holds no secrets: the key arrives as an input, per call.

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        outs = _outputs(props)
        wait_until_ready(
            outs["host"],
            outs["port"],
            outs["ca_certificate_pem"],
            credentials=ClientCredentials(
                certificate_pem=outs["client_certificate_pem"], key_pem=outs["client_key_pem"]
            ),
            timeout_seconds=outs["timeout_seconds"],
            poll_interval_seconds=outs["poll_interval_seconds"],
        )
        return handlers.CreateResult(id_=host_port(outs["host"], outs["port"]), outs=outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        def differs(key: str) -> bool:
            old, new = olds.get(key), news.get(key)
            if key in ("port", "timeout_seconds", "poll_interval_seconds"):
                return old is None or new is None or float(old) != float(new)
            return bool(old != new)

        replaces = [key for key in _REPLACE_ON if differs(key)]
        changed = replaces + [key for key in ("timeout_seconds", "poll_interval_seconds") if differs(key)]
        return handlers.DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        # Only the timing changed (anything else replaces): the server was already ready.
        return handlers.UpdateResult(outs=_outputs(news))

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        # Reports the endpoint this resource waited for; readiness is not re-probed on refresh.
        return handlers.ReadResult(id_=id_, outs=_outputs(props) if props else props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        pulumi.log.debug(f"ApiServerReady {_id}: nothing to delete (a wait leaves nothing behind)")


@dataclass(frozen=True, kw_only=True)
class ApiServerReadyArgs:
    host: str
    """API server host name or IP (the cluster's control-plane endpoint). Required."""
    ca_certificate_pem: pulumi.Input[str]
    """The cluster CA certificate (public) the API server's certificate must chain to. Required."""
    client_certificate_pem: pulumi.Input[str]
    """The admin client certificate (`ClusterBootstrap.admin_client_certificate_pem`) whose
    authorisation is awaited. Required: a wait without it would declare ready a server that
    still refuses every apply (kubeadm >= 1.29 binds the admin group only after start-up)."""
    client_key_pem: pulumi.Input[str]
    """Its private key. Required; made a secret whatever is passed, and kept secret in state."""
    port: int = 6443
    """API server port. Default 6443."""
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    """How long to wait, for both the server to answer and our credentials to be authorised,
    before failing. Default 1200 (20 minutes: clone, first boot, image pulls, kubeadm init).
    Shorter fails faster on a broken bootstrap but may give up on a slow image registry."""
    poll_interval_seconds: int = DEFAULT_POLL_INTERVAL_SECONDS
    """Pause between probes. Default 10: each probe is at most two small requests, so shorter
    only loads a booting API server; longer delays the first apply by up to this much."""

    def __post_init__(self) -> None:
        if self.timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be positive, got {self.timeout_seconds}")
        if not 0 < self.poll_interval_seconds <= self.timeout_seconds:
            raise ValueError("poll_interval_seconds must be positive and at most timeout_seconds")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not a TCP port")


class ApiServerReady(GpuclusterResource, module="kubernetes", name="ApiServerReady"):
    """Exists once the API server at `host:port` answered /readyz AND authorised the admin
    credentials; pass the control-plane VMs as `depends_on` so the wait starts after they are
    created."""

    url: pulumi.Output[str]
    """The /readyz URL that answered."""

    def __init__(
        self,
        name: str,
        args: ApiServerReadyArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            name,
            {
                "host": args.host,
                "port": args.port,
                "ca_certificate_pem": args.ca_certificate_pem,
                "client_certificate_pem": args.client_certificate_pem,
                "client_key_pem": pulumi.Output.secret(args.client_key_pem),
                "timeout_seconds": args.timeout_seconds,
                "poll_interval_seconds": args.poll_interval_seconds,
                "url": None,
            },
            # The key comes back in the outputs (diff compares it): keep it encrypted there too.
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=_SECRET_OUTPUTS)),
        )
