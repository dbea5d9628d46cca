"""The base our vSphere resource handlers share: credentials from `configure` (the gpucluster
provider's configuration, never resource inputs), and one vCenter session per provider
vCenter, shared by every operation, retried; logged out when the process ends.

vCenter I/O itself lives in `components.vcenter` (no Pulumi there); this module is the Pulumi
side of it.

Why one shared session per vCenter (`components.vcenter.session.connect`), not one per
operation: the plugin runs up to `maxConcurrentOperations` (640) operations at once, and a login
each would be 640 logins at once against vCenter's session limit (about 2,000 per vCenter, the
2021 VMware performance blog), each session kept until it was logged out. pyVmomi's SOAP stub is
made for sharing: it keeps a pool of HTTP connections under a lock and opens another when all are
busy (pyVmomi SoapAdapter.py, `SoapStubAdapter.GetConnection`/`ReturnConnection`), so threads do
not wait for each other on one session. An expired session (`NotAuthenticated`, vCenter's idle
timeout or a restart) or a broken connection drops it from the cache and the next attempt logs in
again, once for every thread that meets it (`forget_session` drops only the session that failed;
it is logged out once no operation holds it). An operation's own deadline is no such failure: the
watchdog cut that operation's socket, not the session's, so the session stays for the others.
The shared session is logged out when the plugin exits (`disconnect_all`, at interpreter exit:
the engine interrupts a plugin and kills it 5 s later, pulumi/pulumi sdk/go/common/resource/
plugin/plugin.go, so at most that one session is left to expire, not one per operation).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pulumi.runtime import rpc

from components import resource_handlers as handlers
from components.vcenter.deadline import DeadlineExceeded, operation_deadline
from components.vcenter.errors import VsphereError
from components.vcenter.faults import fault_text, is_connection_error, is_transient
from components.vcenter.session import HTTP_TIMEOUT_S, LOGIN_TIMEOUT_S, connect, forget_session, let_go
from components.vcenter.settings import VcenterConnection
from components.vcenter.tasks import with_retries

T = TypeVar("T")


def is_unknown(value: Any) -> bool:
    """True for a value Pulumi does not know yet (preview of an Output not yet resolved)."""
    return isinstance(value, str) and value == rpc.UNKNOWN


def public_props(props: Mapping[str, Any]) -> dict[str, Any]:
    """Props without the dynamic provider host's keys (`__provider`, in states written before
    the gpucluster plugin; the plugin drops them too, provider/values.py)."""
    return {k: v for k, v in props.items() if not k.startswith("__")}


def check_vm_id(inputs: dict[str, Any]) -> list[handlers.CheckFailure]:
    """Check a `vm_id` input (a VM's BIOS UUID, pulumi-vsphere's VM id) and normalise it in place
    to vCenter's lower case; an unknown one (a preview before the VM exists) passes."""
    vm_id = inputs.get("vm_id")
    if is_unknown(vm_id):
        return []
    if not isinstance(vm_id, str) or not vm_id.strip():
        return [handlers.CheckFailure("vm_id", "must be a VM BIOS UUID")]
    inputs["vm_id"] = vm_id.strip().lower()
    return []


CONFIG_OPERATION_TIMEOUT = "gpucluster:vcenterTimeoutSeconds"
"""The plugin's setting (provider input `vcenterTimeoutSeconds`) for `RetryPolicy.max_total`:
the wall-clock bound of every vCenter operation, logins and retries included. Tests set a few
seconds; unset, the default below."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_total: float = 120.0
    """Wall-clock deadline of one operation, its logins and retries included."""
    login_timeout: float = LOGIN_TIMEOUT_S
    """Bound of one login's API-version lookup (`components.vcenter.session.login`)."""
    http_timeout: float = HTTP_TIMEOUT_S
    """Socket timeout of each SOAP request."""


class VsphereProvider(handlers.ResourceHandlers):
    """Base for our vSphere handlers: credentials come from `configure`, never from inputs."""

    def __init__(self, *, retry: RetryPolicy | None = None) -> None:
        super().__init__()
        self.retry = retry or RetryPolicy()
        self._conn: VcenterConnection | None = None
        self._config_error: VsphereError | None = None

    def configure(self, req: handlers.ConfigureRequest) -> None:
        # Missing settings are remembered, not raised: `check` during a preview must work on a
        # machine without vCenter credentials; the first call that needs vCenter raises it.
        try:
            self._conn = VcenterConnection.from_pulumi_config(req.config)
            self._config_error = None
        except VsphereError as exc:
            self._conn = None
            self._config_error = exc
        bound = req.config.get(CONFIG_OPERATION_TIMEOUT)
        if bound not in (None, ""):
            seconds = float(bound)
            # Each login and each request fits inside the operation's bound.
            self.retry = replace(
                self.retry,
                max_total=seconds,
                login_timeout=min(self.retry.login_timeout, seconds),
                http_timeout=min(self.retry.http_timeout, seconds),
            )

    def use_connection(self, conn: VcenterConnection) -> None:
        """Configure directly (tests, or a program that builds the connection itself)."""
        self._conn = conn
        self._config_error = None

    @property
    def connection(self) -> VcenterConnection:
        if self._conn is not None:
            return self._conn
        if self._config_error is not None:
            raise self._config_error
        raise VsphereError(
            "vSphere provider not configured: export VSPHERE_USER and VSPHERE_PASSWORD (this run's "
            "account) and VSPHERE_SERVER or the stack key vsphere:vsphereServer"
        )

    @property
    def has_connection_settings(self) -> bool:
        return self._conn is not None

    def run(self, fn: Callable[[Any], T], *, what: str, retry: RetryPolicy | None = None) -> T:
        """Run `fn(service_instance)` on the shared session of this vCenter, with retries.

        A connection error or an expired session drops that session, and the next attempt logs in
        again; every login gets at most what is left of the operation's deadline.
        """
        conn = self.connection
        policy = retry or self.retry
        deadline = time.monotonic() + policy.max_total
        sessions: list[Any] = []  # the session this operation uses (a list: the closures rebind nothing)

        def attempt() -> T:
            try:
                if not sessions:
                    left = max(1.0, min(policy.login_timeout, deadline - time.monotonic()))
                    sessions.append(connect(conn, timeout=left, http_timeout=policy.http_timeout))
                return fn(sessions[0])
            except Exception as exc:
                # Past the deadline, whatever broke (a read cut short by the watchdog surfaces as
                # a parse error of the half answer) broke because the deadline passed.
                if (bound.expired or bound.remaining() <= 0) and not is_transient(exc):
                    raise DeadlineExceeded(
                        f"cut off at the operation's {policy.max_total:g}s bound: {fault_text(exc)}"
                    ) from exc
                raise

        def on_transient(exc: BaseException) -> None:
            # Our deadline cut our own socket (DeadlineExceeded, or whatever the cut read raised):
            # the shared session is as good as before, for every other operation on it.
            if isinstance(exc, DeadlineExceeded) or bound.expired or bound.remaining() <= 0:
                return
            if is_connection_error(exc) and sessions:
                forget_session(conn, sessions[0])
                let_go(sessions.pop())

        # Every request of the operation, its login and retries included, ends by the deadline
        # (components/vcenter/deadline.py): a vCenter that trickles or stops answering mid-call
        # cannot hold it past `max_total`. The session is shared with the plugin's other
        # operations (components/vcenter/session.py), so it is not logged out here.
        with operation_deadline(policy.max_total) as bound:
            try:
                return with_retries(
                    attempt,
                    what=what,
                    attempts=policy.attempts,
                    base_delay=policy.base_delay,
                    max_delay=policy.max_delay,
                    max_total=policy.max_total,
                    on_transient=on_transient,
                )
            finally:
                for held in sessions:
                    let_go(held)
