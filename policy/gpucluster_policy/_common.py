"""Small helpers shared by the policies.

The engine hands a policy its properties wrapped in pulumi-policy's proxies (`Mapping` and
`Sequence`, not `dict` and `list`, raising `UnknownValueError` when a value is not known during a
preview), and numbers arrive as floats. Everything here works on those abstract types and reads
only the fields a rule needs, so an unknown value elsewhere in a resource does not stop a check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard

ReportViolation = Callable[..., None]
"""`report_violation(message, urn=None)`, as pulumi-policy passes it."""

VM_TYPE = "vsphere:index/virtualMachine:VirtualMachine"
SWITCH_TYPE = "vsphere:index/distributedVirtualSwitch:DistributedVirtualSwitch"
PORT_GROUP_TYPE = "vsphere:index/distributedPortGroup:DistributedPortGroup"
VGPU_ATTACHMENT_TYPE = "gpucluster:vsphere:VgpuAttachment"
CONFIG_GROUP_TYPE = "kubernetes:yaml/v2:ConfigGroup"


def is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(value, Mapping)


def is_list(value: Any) -> TypeGuard[Sequence[Any]]:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def as_list(value: Any) -> list[Any]:
    """A sequence as a list; None or a non-sequence as an empty list."""
    return list(value) if is_list(value) else []


def as_number(value: Any) -> float | None:
    """Numbers (floats on the wire) and numeric strings; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def as_bool(value: Any) -> bool:
    """True for `true` and `"true"` (config and some providers send strings)."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True


def short_type(type_token: str) -> str:
    """`vsphere:index/virtualMachine:VirtualMachine` -> `VirtualMachine`."""
    return type_token.rsplit(":", 1)[-1]


def fmt_number(value: float | None) -> str:
    if value is None:
        return "unset"
    return str(int(value)) if value.is_integer() else str(value)
