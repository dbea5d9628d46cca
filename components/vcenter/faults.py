"""vim faults: their human text, and which of them (and which socket errors) are worth a retry."""

from __future__ import annotations

import http.client
import socket

from pyVmomi import vim, vmodl

from components.vcenter.errors import VsphereError

_TRANSIENT_FAULTS: tuple[type, ...] = (
    vim.fault.TaskInProgress,  # another task holds the object; it will finish
    vmodl.fault.HostCommunication,  # incl. HostNotConnected, HostNotReachable
    vim.fault.NotAuthenticated,  # session expired or vCenter restarted: log in again
)
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionError,  # refused, reset, aborted, RemoteDisconnected
    TimeoutError,  # socket.timeout is TimeoutError since Python 3.10
    socket.gaierror,  # DNS: may be a resolver hiccup
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
    """The session or its socket is gone: a retry needs a new login."""
    if isinstance(exc, VsphereError):
        return exc.fault is not None and is_connection_error(exc.fault)
    return isinstance(exc, (*_CONNECTION_ERRORS, vim.fault.NotAuthenticated))


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, VsphereError):
        return exc.transient
    return isinstance(exc, _TRANSIENT_FAULTS) or is_connection_error(exc)
