"""vCenter sessions: a login bounded in time, logout, and a per-connection session cache.

Why our own login instead of pyVmomi's `SmartConnect`: `SmartConnect` first asks the server which
API versions it speaks (`__FindSupportedVersion` -> `__GetElementTree` in pyVim/connect.py, pyVmomi
9.1), over an `http.client.HTTP(S)Connection` made *without* a timeout. Its
`httpConnectionTimeout` reaches only the SOAP stub (`SoapStubAdapter`, as the socket timeout of
every later request), and `connectionPoolTimeout` only closes idle pooled connections. So against a
server that accepts the TCP connection and never answers, `SmartConnect` waits forever; only
`socket.setdefaulttimeout` would bound it, and that is process-wide. We do the same version lookup
(`GET /sdk/vimServiceVersions.xml`, the same preference order) with a timeout, then call pyVmomi's
`Connect` with the version found and `httpConnectionTimeout` set, so every request of the login
and after it has a socket timeout.

Why not pyVmomi's `Connect` either: it turns any socket error of its first call
(`RetrieveServiceContent`) into `vim.fault.HostConnectFault(msg=str(e))` (pyVim/connect.py,
`__Login`), a vim fault like a lasting refusal, so a connection reset during a login could not be
told from a real one and was never retried (issue 43). `login` makes the same SOAP stub and the
same two calls (`RetrieveServiceContent`, `SessionManager.Login`) itself: a socket error stays a
socket error (transient), a refused login stays `InvalidLogin` (lasting). Its connections are
`components.vcenter.deadline`'s bounded ones, so every request of a session ends by the
operation's wall-clock deadline.

Sessions are logged out: `session()` logs out when its block ends; the cache (`connect`) is
emptied by `disconnect_all`, which runs at interpreter exit too; a cached session dropped after a
failure (`forget_session`) is logged out once the last operation that holds it lets go
(`let_go`), not left to vCenter's idle timeout (issue 51), one session per hiccup.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import ssl
import threading
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from typing import Any

from pyVim.connect import Disconnect, getSslContext
from pyVmomi import SoapStubAdapter, vim
from pyVmomi.VmomiSupport import GetServiceVersions, versionIdMap

from components.vcenter.deadline import BoundedHTTPConnection, BoundedHTTPSConnection, release
from components.vcenter.errors import VsphereError
from components.vcenter.faults import fault_text, is_connection_error
from components.vcenter.settings import VcenterConnection

#: Socket timeout of every SOAP request (connect and each read), so a vCenter that stops
#: answering fails (and is retried) instead of hanging a `pulumi up` forever.
HTTP_TIMEOUT_S = 60.0
#: Socket timeout of the API-version lookup that starts a login. A vCenter answers it from a
#: static file in milliseconds; a longer wait means it is not answering at all.
LOGIN_TIMEOUT_S = 30.0

_VERSIONS_PATH = "/sdk/vimServiceVersions.xml"
SOAP_POOL_SIZE = 640
"""Idle connections the session's SOAP stub keeps for reuse (pyVmomi's `SoapStubAdapter(poolSize=)`,
default 5): the plugin's operations share one session (this module), up to its operation pool's
640 calls at once (`components.gpucluster_resource.DEFAULT_MAX_CONCURRENT_OPERATIONS`; a test
holds them equal). With 5, every call past the fifth at once opened a new connection and closed it
on return (pyVmomi/SoapAdapter.py `ReturnConnection`), over HTTPS a TLS handshake per call
(issue 52; BENCHMARKS.md, "The plugin over HTTPS")."""


def _api_version(conn: VcenterConnection, *, timeout: float, ssl_context: Any) -> tuple[str, Any]:
    """The most preferred vim25 API version both pyVmomi and the server speak (bounded), and the
    open connection that asked, for the session to go on with (`_connect`)."""
    client: http.client.HTTPConnection
    if conn.protocol == "https":
        client = BoundedHTTPSConnection(conn.server, conn.port, timeout=timeout, context=ssl_context)
    else:
        client = BoundedHTTPConnection(conn.server, conn.port, timeout=timeout)
    try:
        client.request("GET", _VERSIONS_PATH)
        response = client.getresponse()
        body = response.read() if response.status == 200 else b""
    except BaseException:
        client.close()
        raise
    offered: set[str] = set()
    with contextlib.suppress(ElementTree.ParseError):
        root = ElementTree.fromstring(body) if body else None
        # Same reading as pyVmomi's __VersionIsSupported: each namespace's version and its priors.
        if root is not None and root.tag == "namespaces":
            for namespace in root.findall("namespace"):
                offered.update(v.text or "" for v in namespace.findall("version"))
                offered.update(v.text or "" for v in namespace.findall("priorVersions/version"))
    for version in GetServiceVersions("vim25"):
        if versionIdMap.get(version) in offered:
            return str(version), client
    client.close()
    raise VsphereError(
        f"{conn.address} is not a vCenter this pyVmomi can talk to (GET {_VERSIONS_PATH} "
        f"answered {response.status} without a supported vim25 version)"
    )


def login(conn: VcenterConnection, *, timeout: float = LOGIN_TIMEOUT_S, http_timeout: float = HTTP_TIMEOUT_S) -> Any:
    """A new logged-in `vim.ServiceInstance`; the caller logs it out (`logout`).

    Bounded: the version lookup waits at most `timeout` for each socket operation, and each SOAP
    request of the login (and of the session's later calls) at most `http_timeout`.
    Raises VsphereError: transient for an unreachable or silent server, lasting for a refused login
    (its `fault` is the `vim.fault.InvalidLogin`).
    """
    ssl_context = getSslContext(conn.server, None, not conn.verify_ssl)
    try:
        version, client = _api_version(conn, timeout=timeout, ssl_context=ssl_context)
    except TimeoutError as exc:
        raise VsphereError(
            f"vCenter {conn.address} did not answer within {timeout:g}s (GET {_VERSIONS_PATH}, the API "
            "version lookup that starts a login); check vsphere:vsphereServer and that vCenter is up",
            fault=exc,
            transient=True,
        ) from exc
    except ssl.SSLError as exc:  # lasting: a retry meets the same certificate
        raise VsphereError(
            f"TLS with vCenter {conn.address} failed: {fault_text(exc)} (a self-signed certificate needs "
            "vsphere:allowUnverifiedSsl: true, or its CA in the system trust store)",
            fault=exc,
        ) from exc
    except (OSError, http.client.HTTPException) as exc:  # refused, DNS, reset, garbled answer
        raise VsphereError(
            f"cannot reach vCenter {conn.address}: {fault_text(exc)}", fault=exc, transient=True
        ) from exc
    try:
        return _connect(conn, version, ssl_context, http_timeout, client)
    except vim.fault.InvalidLogin as exc:
        raise VsphereError(
            f"vCenter {conn.address} refused the login of user {conn.user!r}: {fault_text(exc)}", fault=exc
        ) from exc
    except Exception as exc:
        if is_connection_error(exc):
            raise VsphereError(
                f"vCenter {conn.address} dropped the login: {fault_text(exc)}", fault=exc, transient=True
            ) from exc
        raise


class PooledStub(SoapStubAdapter):
    """pyVmomi's SOAP stub, whose pool takes a connection back free of the deadline of the call that
    used it (components/vcenter/deadline.py, `release`): the next operation to take it from the pool
    (`GetConnection`) is bound by its own deadline only."""

    def ReturnConnection(self, conn: Any) -> None:  # pyVmomi's name
        release(conn)
        super().ReturnConnection(conn)


def _connect(conn: VcenterConnection, version: str, ssl_context: Any, http_timeout: float, client: Any) -> Any:
    """What pyVim.connect's `__Login` does for a user and password, without wrapping socket errors
    in HostConnectFault (module doc), over bounded connections.

    The version lookup's connection goes on as the session's (`SoapStubAdapter.ReturnConnection`
    puts it in the stub's pool, where its first call takes it): one TCP connection (and TLS
    handshake) per login instead of two, and one chance less for a flaky network to break it."""
    stub = PooledStub(
        conn.server,
        # pyVmomi's convention (SmartConnect does the same): a negative port means plain HTTP.
        -conn.port if conn.protocol == "http" else conn.port,
        version=version,
        sslContext=ssl_context,
        httpConnectionTimeout=http_timeout,
        poolSize=SOAP_POOL_SIZE,
    )
    # The same constructor arguments (`schemeArgs`, set above); only the class is ours.
    stub.scheme = BoundedHTTPConnection if conn.protocol == "http" else BoundedHTTPSConnection  # type: ignore[assignment]
    client.timeout = client._base_timeout = http_timeout  # from here on a SOAP connection
    if client.sock is not None:
        client.sock.settimeout(http_timeout)
    stub.ReturnConnection(client)
    si = vim.ServiceInstance("ServiceInstance", stub)
    manager: Any = si.RetrieveContent().sessionManager
    manager.Login(conn.user, conn.password, None)
    return si


def logout(si: Any) -> None:
    """Log a session out. Errors are ignored: the session may be gone already, nothing to save."""
    with contextlib.suppress(Exception):
        Disconnect(si)


@contextlib.contextmanager
def session(
    conn: VcenterConnection, *, timeout: float = LOGIN_TIMEOUT_S, http_timeout: float = HTTP_TIMEOUT_S
) -> Iterator[Any]:
    """`with session(conn) as si:` a logged-in service instance, logged out when the block ends."""
    si = login(conn, timeout=timeout, http_timeout=http_timeout)
    try:
        yield si
    finally:
        logout(si)


# ---------------------------------------------------------------------------------------------
# The cache: one session per connection settings, shared by every thread of the process (the
# gpucluster plugin's operations: components/vsphere/provider_base.py says why).

_CACHE: dict[VcenterConnection, Any] = {}
_LOCKS: dict[VcenterConnection, threading.Lock] = {}
_HOLDERS: dict[int, int] = {}
"""id(session) -> how many operations hold it (each `connect` holds, each `let_go` lets go)."""
_DROPPED: dict[int, Any] = {}
"""id(session) -> a session no longer cached, logged out when its last holder lets go."""
_REGISTRY = threading.Lock()
"""Guards the dicts only; never held during I/O."""


def _lock_for(conn: VcenterConnection) -> threading.Lock:
    with _REGISTRY:
        return _LOCKS.setdefault(conn, threading.Lock())


def connect(conn: VcenterConnection, *, timeout: float = LOGIN_TIMEOUT_S, http_timeout: float = HTTP_TIMEOUT_S) -> Any:
    """A cached logged-in session for these settings.

    Locked per connection, not per process: a login to a vCenter that does not answer holds up
    only the callers of that same vCenter, and them for at most the login's bound.
    """
    lock = _lock_for(conn)
    # Bounded like the login itself: callers queued behind a login to a silent vCenter give up
    # with it instead of logging in one after another, each past its operation's deadline.
    if not lock.acquire(timeout=timeout):
        raise VsphereError(
            f"vCenter {conn.address}: another login has not finished within {timeout:g}s", transient=True
        )
    try:
        with _REGISTRY:
            si = _CACHE.get(conn)
            if si is not None:
                _HOLDERS[id(si)] = _HOLDERS.get(id(si), 0) + 1
                return si
        si = login(conn, timeout=timeout, http_timeout=http_timeout)
        with _REGISTRY:
            _CACHE[conn] = si
            _HOLDERS[id(si)] = _HOLDERS.get(id(si), 0) + 1
        return si
    finally:
        lock.release()


def let_go(si: Any) -> None:
    """An operation is done with a session `connect` gave it; a dropped session is logged out when
    its last holder lets go (the others may still be waiting on a task through it)."""
    with _REGISTRY:
        left = _HOLDERS.get(id(si), 0) - 1
        if left > 0:
            _HOLDERS[id(si)] = left
            return
        _HOLDERS.pop(id(si), None)
        dropped = _DROPPED.pop(id(si), None)
    if dropped is not None:
        _logout_in_background(dropped)


def _logout_in_background(si: Any) -> None:
    """Log a dropped session out without holding up the operation that met its failure: a vCenter
    that just reset a connection may not answer the logout either (each request still ends by its
    socket timeout, HTTP_TIMEOUT_S; the thread carries no operation's deadline)."""
    threading.Thread(target=logout, args=(si,), name="vcenter-logout", daemon=True).start()


def forget(conn: VcenterConnection, *, logout_session: bool = False) -> None:
    """Drop a cached session (after a connection error or an expired session).

    No logout by default: the session is gone or vCenter is unreachable, and a logout call to
    an unreachable vCenter would only wait out the socket timeout.
    """
    with _REGISTRY:
        si = _CACHE.pop(conn, None)
    if si is not None and logout_session:
        logout(si)


def forget_session(conn: VcenterConnection, si: Any) -> None:
    """Drop `si` from the cache if it is still the cached session of `conn` (after it failed).

    Many threads share a session; each that meets its failure calls this, and only the first
    drops it: a session another thread has logged in since stays. The dropped session is logged
    out when no operation holds it any more (`let_go`): after an expired session that changes
    nothing, after a reset connection it frees vCenter's session at once.
    """
    with _REGISTRY:
        if _CACHE.get(conn) is si:
            del _CACHE[conn]
            if _HOLDERS.get(id(si), 0) > 0:
                _DROPPED[id(si)] = si
                return
        else:
            return
    _logout_in_background(si)


def disconnect_all() -> None:
    """Log out of every cached session and every dropped one (end of a test session or program)."""
    with _REGISTRY:
        cached = list(_CACHE)
        dropped = list(_DROPPED.values())
        _DROPPED.clear()
    for conn in cached:
        forget(conn, logout_session=True)
    for si in dropped:
        logout(si)


atexit.register(disconnect_all)
