"""The exception every vCenter helper raises. No pyVmomi here, so pure code can catch it."""

from __future__ import annotations


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
