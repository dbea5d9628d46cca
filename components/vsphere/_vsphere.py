"""Shared pyvmomi helpers for our dynamic providers (community.vmware style).

What lives here: the vCenter connection settings and how they are read (stack config or
environment, never resource inputs), a per-process connection cache, small `find_*` lookups,
`wait_for_task` that re-raises the vim fault text, `with_retries` for transient faults, and the
`VsphereProvider` base class the three providers share (configure, pickling without secrets,
one retried vCenter session per operation).
"""

from __future__ import annotations

import contextlib
import http.client
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import pulumi.dynamic
from pulumi.runtime import rpc
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim, vmodl

T = TypeVar("T")

# Stack config keys: the ones pulumi-vsphere reads, so one set of settings serves both providers.
CONFIG_SERVER = "vsphere:vsphereServer"
CONFIG_USER = "vsphere:user"
CONFIG_PASSWORD = "vsphere:password"
CONFIG_ALLOW_UNVERIFIED_SSL = "vsphere:allowUnverifiedSsl"

# Environment fallbacks, also the ones pulumi-vsphere (terraform-provider-vsphere) reads.
ENV_FALLBACKS: Mapping[str, str] = {
    CONFIG_SERVER: "VSPHERE_SERVER",
    CONFIG_USER: "VSPHERE_USER",
    CONFIG_PASSWORD: "VSPHERE_PASSWORD",
    CONFIG_ALLOW_UNVERIFIED_SSL: "VSPHERE_ALLOW_UNVERIFIED_SSL",
}

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off", ""})


class VsphereError(Exception):
    """A vCenter operation failed; the message carries the vim fault text and the object name."""

    def __init__(
        self,
        message: str,
        *,
        object_name: str | None = None,
        fault: BaseException | None = None,
        transient: bool = False,
    ) -> None:
        super().__init__(message)
        self.object_name = object_name
        self.fault = fault
        self.transient = transient


class ConfigSource(Protocol):
    """What `pulumi.dynamic.Config` and `pulumi.Config`-like objects offer."""

    def get(self, key: str) -> Any: ...


def parse_bool(value: Any, *, key: str) -> bool:
    """Parse a config/env boolean; a typo is an error naming the key, never silently False."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise VsphereError(f"{key}: expected true or false, got {value!r}")


def parse_server(server: str) -> tuple[str, int, str]:
    """Split a vCenter server setting into (host, port, protocol).

    Accepts what pulumi-vsphere accepts (`vc.example.com`, `vc.example.com:8443`, `[::1]:443`)
    and, for the simulator in tests, a URL with a scheme (`http://127.0.0.1:8989/sdk`).
    """
    text = server.strip()
    if not text:
        raise VsphereError(f"{CONFIG_SERVER} is empty")
    if "://" not in text:
        text = "https://" + text
    parts = urllib.parse.urlsplit(text)
    protocol = parts.scheme.lower()
    if protocol not in ("http", "https"):
        raise VsphereError(f"{CONFIG_SERVER}: unsupported scheme {parts.scheme!r} in {server!r}")
    host = parts.hostname
    if not host:
        raise VsphereError(f"{CONFIG_SERVER}: no host name in {server!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise VsphereError(f"{CONFIG_SERVER}: bad port in {server!r}") from exc
    if port is None:
        port = 443 if protocol == "https" else 80
    return host, port, protocol


@dataclass(frozen=True)
class VcenterConnection:
    """Where and how to log in to vCenter. The password never shows in `repr`."""

    server: str
    user: str
    password: str = field(repr=False)
    port: int = 443
    protocol: str = "https"
    verify_ssl: bool = True

    @classmethod
    def from_pulumi_config(cls, config: ConfigSource | None, env: Mapping[str, str] | None = None) -> VcenterConnection:
        """Read the `vsphere:*` stack config keys, falling back to the VSPHERE_* env vars.

        Raises VsphereError naming every missing key (and its env var) at once.
        """
        import os

        environ = os.environ if env is None else env

        def lookup(key: str) -> Any:
            value = config.get(key) if config is not None else None
            if value is None or value == "":
                value = environ.get(ENV_FALLBACKS[key])
            return None if value == "" else value

        values = {key: lookup(key) for key in ENV_FALLBACKS}
        missing = [
            f"{key} (or env {ENV_FALLBACKS[key]})"
            for key in (CONFIG_SERVER, CONFIG_USER, CONFIG_PASSWORD)
            if values[key] is None
        ]
        if missing:
            raise VsphereError(
                "vCenter connection settings missing: "
                + ", ".join(missing)
                + ". Set them with `pulumi config set vsphere:vsphereServer ...` "
                "(`--secret` for the password) or export the environment variables."
            )
        host, port, protocol = parse_server(str(values[CONFIG_SERVER]))
        unverified = values[CONFIG_ALLOW_UNVERIFIED_SSL]
        allow_unverified = False if unverified is None else parse_bool(unverified, key=CONFIG_ALLOW_UNVERIFIED_SSL)
        return cls(
            server=host,
            user=str(values[CONFIG_USER]),
            password=str(values[CONFIG_PASSWORD]),
            port=port,
            protocol=protocol,
            verify_ssl=not allow_unverified,
        )

    @classmethod
    def from_url(cls, url: str, *, verify_ssl: bool = True) -> VcenterConnection:
        """`http://user:pass@127.0.0.1:PORT/sdk`, as the simulator harness prints it."""
        parts = urllib.parse.urlsplit(url)
        if parts.username is None or parts.password is None:
            raise VsphereError("vCenter URL must carry user:password@")
        host, port, protocol = parse_server(f"{parts.scheme}://{parts.hostname}:{parts.port}")
        return cls(
            server=host,
            user=urllib.parse.unquote(parts.username),
            password=urllib.parse.unquote(parts.password),
            port=port,
            protocol=protocol,
            verify_ssl=verify_ssl,
        )

    @property
    def address(self) -> str:
        return f"{self.protocol}://{self.server}:{self.port}"


# ---------------------------------------------------------------------------------------------
# Connections


_CACHE: dict[VcenterConnection, Any] = {}
_CACHE_LOCK = threading.Lock()

#: Socket timeout for every SOAP call, so a vCenter that stops answering fails (and is retried)
#: instead of hanging a `pulumi up` forever.
HTTP_TIMEOUT_S = 60.0


def connect(conn: VcenterConnection, *, http_timeout: float = HTTP_TIMEOUT_S) -> Any:
    """A logged-in `vim.ServiceInstance`, cached per process and connection settings."""
    with _CACHE_LOCK:
        si = _CACHE.get(conn)
        if si is not None:
            return si
        try:
            si = SmartConnect(
                protocol=conn.protocol,
                host=conn.server,
                port=conn.port,
                user=conn.user,
                pwd=conn.password,
                disableSslCertValidation=not conn.verify_ssl,
                httpConnectionTimeout=http_timeout,
            )
        except vim.fault.InvalidLogin as exc:
            raise VsphereError(
                f"vCenter {conn.address} refused the login of user {conn.user!r}: {fault_text(exc)}",
                fault=exc,
            ) from exc
        _CACHE[conn] = si
        return si


def forget(conn: VcenterConnection, *, logout: bool = False) -> None:
    """Drop a cached connection (after a connection error or an expired session).

    No logout by default: the session is gone or vCenter is unreachable, and a logout call to
    an unreachable vCenter would only wait out the socket timeout.
    """
    with _CACHE_LOCK:
        si = _CACHE.pop(conn, None)
    if si is not None and logout:
        # The connection may already be broken; there is nothing to save from it.
        with contextlib.suppress(Exception):
            Disconnect(si)


def disconnect_all() -> None:
    """Log out of every cached session (end of a test session or program)."""
    for conn in list(_CACHE):
        forget(conn, logout=True)


# ---------------------------------------------------------------------------------------------
# Faults, retries, tasks


_TRANSIENT_FAULTS: tuple[type, ...] = (
    vim.fault.TaskInProgress,  # another task holds the object; it will finish
    vmodl.fault.HostCommunication,  # incl. HostNotConnected, HostNotReachable
    vim.fault.NotAuthenticated,  # session expired or vCenter restarted: log in again
)
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionError,  # refused, reset, aborted, RemoteDisconnected
    TimeoutError,
    http.client.HTTPException,  # BadStatusLine, IncompleteRead
)


def fault_text(exc: BaseException) -> str:
    """The human part of a vim fault: its msg/localizedMessage, else its type name."""
    if isinstance(exc, vmodl.MethodFault):
        name = getattr(exc, "_wsdlName", None) or type(exc).__name__
        text = getattr(exc, "msg", None) or getattr(exc, "localizedMessage", None)
        if not text:
            messages = [m.message for m in (getattr(exc, "faultMessage", None) or []) if m.message]
            text = "; ".join(messages)
        return f"{name}: {text}" if text else name
    if isinstance(exc, VsphereError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, (*_CONNECTION_ERRORS, vim.fault.NotAuthenticated))


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, VsphereError):
        return exc.transient
    return isinstance(exc, _TRANSIENT_FAULTS) or is_connection_error(exc)


def backoff_delays(*, base: float, cap: float, attempts: int, rng: Callable[[], float] = random.random) -> list[float]:
    """Exponential backoff with jitter: delay i is in [base*2^i / 2, base*2^i], capped."""
    return [min(cap, base * 2**i) * (0.5 + rng() / 2) for i in range(attempts)]


def with_retries(
    fn: Callable[[], T],
    *,
    what: str,
    attempts: int = 6,
    base_delay: float = 0.5,
    max_delay: float = 8.0,
    max_total: float = 120.0,
    on_transient: Callable[[BaseException], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `fn`, retrying transient faults with exponential backoff and jitter.

    Lasting faults fail at once. The total time spent (calls and sleeps) is bounded by
    `max_total`. Errors are re-raised as VsphereError carrying the fault text and `what`.
    """
    start = time.monotonic()
    slept = 0.0
    delays = backoff_delays(base=base_delay, cap=max_delay, attempts=max(0, attempts - 1))
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:  # classified right below
            transient = is_transient(exc)
            if transient and on_transient is not None:
                on_transient(exc)
            # Sleeps count even when `sleep` is not time.sleep (tests), so the bound holds.
            elapsed = max(time.monotonic() - start, slept)
            last = attempt + 1 >= attempts
            if not transient or last or elapsed + delays[attempt] > max_total:
                if isinstance(exc, VsphereError) and not transient:
                    raise
                note = f" (gave up after {attempt + 1} attempts in {elapsed:.0f}s)" if transient else ""
                object_name = exc.object_name if isinstance(exc, VsphereError) else None
                raise VsphereError(
                    f"{what}: {fault_text(exc)}{note}",
                    object_name=object_name,
                    fault=exc,
                    transient=transient,
                ) from exc
            sleep(delays[attempt])
            slept += delays[attempt]
    raise AssertionError("unreachable")  # pragma: no cover


def wait_for_task(
    task: Any,
    *,
    timeout: float = 600.0,
    object_name: str | None = None,
    what: str | None = None,
    poll_initial: float = 0.1,
    poll_max: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """Wait for a vim Task; return its result, or raise VsphereError with the fault text."""
    deadline = time.monotonic() + timeout
    delay = poll_initial
    while True:
        info = task.info
        if info.state == vim.TaskInfo.State.success:
            return info.result
        label = what or info.descriptionId or "task"
        name = object_name or info.entityName or "?"
        if info.state == vim.TaskInfo.State.error:
            error = info.error
            raise VsphereError(
                f"{label} on {name} failed: {fault_text(error) if error else 'unknown error'}",
                object_name=name,
                fault=error,
                transient=bool(error is not None and is_transient(error)),
            )
        if time.monotonic() >= deadline:
            raise VsphereError(
                f"{label} on {name} did not finish within {timeout:.0f}s (task {task._moId})",
                object_name=name,
            )
        sleep(delay * (0.75 + random.random() / 2))
        delay = min(poll_max, delay * 1.5)


# ---------------------------------------------------------------------------------------------
# Lookups


def collect_properties(si: Any, root: Any, vimtype: type, paths: list[str]) -> list[tuple[Any, dict[str, Any]]]:
    """(object, {path: value}) for every object of a type under `root`, in one collector round.

    Unset properties are simply absent. (Reading them one by one through pyVmomi's accessors works
    on vCenter too, but govmomi's simulator drops the connection on an unset one.)
    """
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(root, [vimtype], True)
    try:
        traversal = vmodl.query.PropertyCollector.TraversalSpec(
            name="view", path="view", skip=False, type=vim.view.ContainerView
        )
        spec = vmodl.query.PropertyCollector.FilterSpec(
            objectSet=[vmodl.query.PropertyCollector.ObjectSpec(obj=view, skip=True, selectSet=[traversal])],
            propSet=[vmodl.query.PropertyCollector.PropertySpec(type=vimtype, pathSet=paths)],
        )
        collector = content.propertyCollector
        result = collector.RetrievePropertiesEx([spec], vmodl.query.PropertyCollector.RetrieveOptions())
        found: list[tuple[Any, dict[str, Any]]] = []
        while result is not None:
            for obj in result.objects:
                found.append((obj.obj, {prop.name: prop.val for prop in obj.propSet}))
            if not result.token:
                break
            result = collector.ContinueRetrievePropertiesEx(result.token)
        return found
    finally:
        view.Destroy()


def _names_in_view(si: Any, vimtype: type) -> list[tuple[Any, str]]:
    """(object, name) for every object of a type, fetched in one property-collector round."""
    everything = collect_properties(si, si.RetrieveContent().rootFolder, vimtype, ["name"])
    return [(obj, props["name"]) for obj, props in everything if "name" in props]


def _find_by_name(si: Any, vimtype: type, name: str, kind: str) -> Any | None:
    matches = [obj for obj, obj_name in _names_in_view(si, vimtype) if obj_name == name]
    if len(matches) > 1:
        ids = ", ".join(sorted(m._moId for m in matches))
        raise VsphereError(
            f"{kind} name {name!r} is ambiguous in vCenter ({ids}); names must be unique",
            object_name=name,
        )
    return matches[0] if matches else None


def find_host_or_none(si: Any, name: str) -> Any | None:
    return _find_by_name(si, vim.HostSystem, name, "host")


def find_host(si: Any, name: str) -> Any:
    """The HostSystem with this vCenter name; VsphereError naming it when absent."""
    host = find_host_or_none(si, name)
    if host is None:
        raise VsphereError(f"ESXi host {name!r} not found in vCenter", object_name=name)
    return host


def find_vm(si: Any, name: str) -> Any | None:
    """The VirtualMachine with this name, None if none (VsphereError if ambiguous)."""
    return _find_by_name(si, vim.VirtualMachine, name, "virtual machine")


def find_vm_by_uuid(si: Any, uuid: str) -> Any | None:
    """The VM whose BIOS UUID (`config.uuid`) is `uuid`: what pulumi-vsphere uses as its VM id."""
    index = si.RetrieveContent().searchIndex
    return index.FindByUuid(datacenter=None, uuid=uuid, vmSearch=True, instanceUuid=False)


# ---------------------------------------------------------------------------------------------
# Provider plumbing shared by the dynamic providers


def is_unknown(value: Any) -> bool:
    """True for a value Pulumi does not know yet (preview of an Output not yet resolved)."""
    return isinstance(value, str) and value == rpc.UNKNOWN


def public_props(props: Mapping[str, Any]) -> dict[str, Any]:
    """Props without the engine's serialized provider (`__provider`)."""
    return {k: v for k, v in props.items() if not k.startswith("__")}


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_total: float = 120.0


class VsphereProvider(pulumi.dynamic.ResourceProvider):
    """Base for our providers: credentials come from `configure`, never from inputs or pickles."""

    def __init__(self, *, retry: RetryPolicy | None = None) -> None:
        super().__init__()
        self.retry = retry or RetryPolicy()
        self._conn: VcenterConnection | None = None
        self._config_error: VsphereError | None = None

    # The SDK pickles the provider (dill) into the state file as `__provider`. Connection
    # settings are set only by `configure`, which runs after unpickling, and are dropped here
    # too so a configured provider never carries a password into a pickle.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_conn"] = None
        state["_config_error"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def configure(self, req: pulumi.dynamic.ConfigureRequest) -> None:
        # Missing settings are remembered, not raised: `check` during a preview must work on a
        # machine without vCenter credentials; the first call that needs vCenter raises it.
        try:
            self._conn = VcenterConnection.from_pulumi_config(req.config)
            self._config_error = None
        except VsphereError as exc:
            self._conn = None
            self._config_error = exc

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
            "vSphere provider not configured: set vsphere:vsphereServer, vsphere:user and "
            "vsphere:password in the stack config (or VSPHERE_SERVER/USER/PASSWORD)"
        )

    @property
    def has_connection_settings(self) -> bool:
        return self._conn is not None

    def run(self, fn: Callable[[Any], T], *, what: str, retry: RetryPolicy | None = None) -> T:
        """Run `fn(service_instance)` with retries; a connection error drops the cached session."""
        conn = self.connection
        policy = retry or self.retry

        def on_transient(exc: BaseException) -> None:
            if is_connection_error(exc) or (
                isinstance(exc, VsphereError) and exc.fault is not None and is_connection_error(exc.fault)
            ):
                forget(conn)

        return with_retries(
            lambda: fn(connect(conn)),
            what=what,
            attempts=policy.attempts,
            base_delay=policy.base_delay,
            max_delay=policy.max_delay,
            max_total=policy.max_total,
            on_transient=on_transient,
        )
