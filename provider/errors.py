"""What the engine shows when a handler fails: the handler's one-line reason, not the SDK's
wrapper.

The SDK's servicer wraps every failed call as `raise Exception(f"{e}:\n{traceback}")`
(pulumi/provider/experimental/server.py, `_raise_with_traceback`), and grpc.aio answers an
exception it did not expect with "Unexpected <class 'Exception'>: ..." (grpc
`_cython/_cygrpc/aio/server.pyx.pxi`, `_handle_exceptions`), so a user saw that line and a Python
traceback for "host esxi-07 not found". This servicer ends such a call with `context.abort` and
the original exception's text: for our own errors (`VsphereError`, a handler's `ValueError` with
the fix in it) the text alone; for anything else its type too, and the traceback goes to the
plugin's stderr (the engine keeps it in its verbose log: `pulumi up -v=9 --logtostderr`).
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

import grpc
from pulumi.provider.experimental.server import ProviderServicer

from components.vcenter.errors import VsphereError

_WRAPPED = ("Check", "Diff", "Create", "Read", "Update", "Delete", "Configure", "CheckConfig", "DiffConfig")
_REASONS = (VsphereError, ValueError)
"""Exceptions whose text is written for a user: shown as it is."""


def _original(exc: BaseException) -> BaseException:
    """The handler's exception: the SDK's wrapper is raised while handling it (its context)."""
    inner = exc.__context__
    return inner if inner is not None and str(exc).startswith(str(inner)) else exc


def reason(exc: BaseException) -> str:
    """One line for the engine: the handler's own text."""
    original = _original(exc)
    text = " ".join(str(original).split()) or type(original).__name__
    return text if isinstance(original, _REASONS) else f"{type(original).__name__}: {text}"


class CleanErrorsServicer(ProviderServicer):
    """The SDK's servicer, with each resource call's failure answered as `reason(...)`."""


def _clean(name: str) -> Any:
    wrapped = getattr(ProviderServicer, name)

    async def call(self: ProviderServicer, request: Any, context: Any) -> Any:
        try:
            return await wrapped(self, request, context)
        except NotImplementedError:
            raise
        except Exception as exc:  # answered below with its reason
            if isinstance(exc, grpc.aio.AbortError):
                raise
            if not isinstance(_original(exc), _REASONS):
                traceback.print_exception(_original(exc), file=sys.stderr)
            await context.abort(grpc.StatusCode.UNKNOWN, reason(exc))

    call.__name__ = name
    return call


for _name in _WRAPPED:
    setattr(CleanErrorsServicer, _name, _clean(_name))
