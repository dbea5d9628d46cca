"""The engine's property values <-> the plain Python values our handlers were written for.

Plain values are what the dynamic provider host gave them (pulumi/dynamic/__main__.py:
`rpc.deserialize_properties`): numbers as floats, an unknown as the `rpc.UNKNOWN` string (which
`components.vsphere.provider_base.is_unknown` tests), secrets unwrapped. Which top-level keys
were secret is kept, and those keys are secret again in what the plugin answers, so a secret
input (a kubeconfig, a client key) comes back as a secret output: the plugin declares
`accept_secrets`, and marks them itself rather than counting on the engine to re-mark them.

Keys starting with `__` are the dynamic provider host's (`__provider`, the pickled provider in
states written before the plugin); they are dropped on the way in and never written back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi.provider.experimental.property_value import Computed, PropertyValue
from pulumi.runtime import rpc


def is_internal_key(key: str) -> bool:
    return key.startswith("__")


def to_plain(value: PropertyValue) -> Any:
    inner = value.value
    if isinstance(inner, Computed):
        return rpc.UNKNOWN
    if isinstance(inner, Mapping):
        return {k: to_plain(v) for k, v in inner.items()}
    if isinstance(inner, tuple):
        return [to_plain(v) for v in inner]
    return inner


def plain_map(props: Mapping[str, PropertyValue]) -> tuple[dict[str, Any], set[str]]:
    """The plain values of a property map without `__*` keys, and the keys holding a secret."""
    plain = {k: to_plain(v) for k, v in props.items() if not is_internal_key(k)}
    secret = {k for k, v in props.items() if not is_internal_key(k) and v.contains_secret()}
    return plain, secret


def to_property(value: Any) -> PropertyValue:
    if isinstance(value, PropertyValue):
        return value
    if isinstance(value, str) and value == rpc.UNKNOWN:
        return PropertyValue.computed()
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return PropertyValue(value)
    if isinstance(value, int):
        return PropertyValue(float(value))
    if isinstance(value, Mapping):
        return PropertyValue({str(k): to_property(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return PropertyValue([to_property(v) for v in value])
    raise TypeError(f"cannot return a {type(value).__name__} as a property value")


def property_map(plain: Mapping[str, Any] | None, secret: set[str]) -> dict[str, PropertyValue]:
    """A property map from plain values; the keys in `secret` are marked secret."""
    out: dict[str, PropertyValue] = {}
    for key, value in (plain or {}).items():
        if is_internal_key(key):
            continue
        prop = to_property(value)
        out[key] = prop.with_secret(True) if key in secret and not prop.is_secret else prop
    return out
