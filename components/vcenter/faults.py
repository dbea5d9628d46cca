"""vim faults: their human text, and which of them (and which socket errors) are worth a retry."""

from __future__ import annotations

import http.client
import socket
from xml.parsers.expat import ExpatError

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
    ExpatError,  # an answer cut short: pyVmomi parses the body as it reads it
)


def host_faults(exc: BaseException) -> dict[str, str]:
    """A DvsOperationBulkFault's own reason per host, by the host's managed object id.

    vCenter fails a switch reconfigure of several hosts with one DvsOperationBulkFault whose
    `hostFault[]` says which host failed and why (vSphere API reference,
    DvsOperationBulkFaultFaultOnHost: `host`, `fault`); the fault's own text is the same for every
    batch ("Cannot complete a vSphere Distributed Switch operation for one or more host members.")."""
    found: dict[str, str] = {}
    for entry in getattr(exc, "hostFault", None) or []:
        host = getattr(entry, "host", None)
        inner = getattr(entry, "fault", None)
        if host is None or inner is None:
            continue
        if isinstance(inner, vmodl.LocalizedMethodFault):  # the wire type of `fault` here
            nested = getattr(inner, "fault", None)
            kind = (getattr(nested, "_wsdlName", None) or type(nested).__name__) if nested is not None else ""
            message = getattr(inner, "localizedMessage", None)
            found[host._moId] = f"{kind}: {message}" if kind and message else message or kind
        else:
            found[host._moId] = fault_text(inner)
    return found


def fault_text(exc: BaseException, host_names: dict[str, str] | None = None) -> str:
    """The human part of a vim fault: its msg/localizedMessage, else its type name; for a
    DvsOperationBulkFault, each host's own reason too (`host_names`: moId -> name, for the text)."""
    if isinstance(exc, vmodl.MethodFault):
        name = getattr(exc, "_wsdlName", None) or type(exc).__name__
        text = getattr(exc, "msg", None) or getattr(exc, "localizedMessage", None)
        if not text:
            messages = [m.message for m in (getattr(exc, "faultMessage", None) or []) if m.message]
            text = "; ".join(messages)
        per_host = host_faults(exc)
        if per_host:
            names = host_names or {}
            hosts = "; ".join(f"host {names.get(moid, moid)}: {why}" for moid, why in sorted(per_host.items()))
            text = f"{text} ({hosts})" if text else hosts
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
