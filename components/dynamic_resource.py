"""The base class of our dynamic resources, working around a scaling bug of the Pulumi SDK.

`pulumi.dynamic.dynamic.serialize_provider` (seen in pulumi 3.272) makes dill's output
deterministic by replacing `pickle._Pickler._batch_setitems` and `save_dict` with sorting wrappers
around the *current* ones, and never puts the originals back. Each dynamic resource built in a
process therefore nests one more wrapper: pickling gets slower with every resource, and after about
480 of them the nesting passes Python's recursion limit and `pulumi up` fails with RecursionError.
We build three per GPU worker, so a 160-worker environment would not deploy.

Restoring the two attributes after each construction keeps exactly one wrapper per call; the
serialized provider is byte-for-byte what the SDK would produce (sorting sorted items changes
nothing). Remove this once the SDK restores them itself.

The SDK also serializes the provider once per resource, though every resource of a kind carries an
equal provider (same class, same settings): 1,500 identical dill runs at 512 GPU workers. We
serialize each distinct provider once per process and hand the SDK the same string it would have
computed (a test compares them).

Last, the SDK re-reads a resource class's annotations with `typing.get_type_hints` on every
registration (`pulumi._types.resource_types`, uncached), to convert output values to the annotated
types. Ours are all `str`, `bool` or lists of `str`, which need no conversion, so a subclass's
annotations stay for type checkers and are dropped from the class at runtime: 0.2 s at 512 GPU
workers (1,536 registrations), and the same outputs.
"""

from __future__ import annotations

import contextlib
import inspect
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pulumi
import pulumi.dynamic
import pulumi.dynamic.dynamic as sdk_dynamic

_UNCONVERTED_OUTPUT_TYPES = frozenset(f"pulumi.Output[{t}]" for t in ("str", "bool", "list[str]"))


def _needs_no_conversion(annotation: object) -> bool:
    """Output types the SDK would pass through unchanged (annotations are strings here: every
    module of ours has `from __future__ import annotations`)."""
    return annotation in _UNCONVERTED_OUTPUT_TYPES


@contextlib.contextmanager
def sdk_pickler_restored() -> Iterator[None]:
    """Put back the pure-Python pickler's methods that `serialize_provider` replaces."""
    pickler: Any = pickle._Pickler
    saved = (pickler._batch_setitems, pickler.save_dict)
    try:
        yield
    finally:
        pickler._batch_setitems, pickler.save_dict = saved


_serialized: dict[tuple[type, str], str] = {}


def _provider_key(provider: pulumi.dynamic.ResourceProvider) -> tuple[type, str]:
    """Equal providers get equal keys: their class and their settings (never credentials: those
    arrive later, in `configure`)."""
    return type(provider), repr(sorted(vars(provider).items()))


def serialize_once(serialize: Callable[[Any], str]) -> Callable[[Any], str]:
    def serialize_cached(provider: pulumi.dynamic.ResourceProvider) -> str:
        key = _provider_key(provider)
        if key not in _serialized:
            _serialized[key] = serialize(provider)
        return _serialized[key]

    return serialize_cached


@contextlib.contextmanager
def provider_serialized_once() -> Iterator[None]:
    """Within the block, the SDK's `serialize_provider` reuses the string of an equal provider."""
    original = sdk_dynamic.serialize_provider
    sdk_dynamic.serialize_provider = serialize_once(original)
    try:
        yield
    finally:
        sdk_dynamic.serialize_provider = original


class DynamicResource(pulumi.dynamic.Resource):
    """`pulumi.dynamic.Resource` that leaves the process's pickler as it found it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, annotation in inspect.get_annotations(cls).items():
            if not _needs_no_conversion(annotation):
                raise TypeError(f"{cls.__name__}.{name}: output type {annotation!r} would need conversion")
        cls.__annotations__ = {}

    def __init__(
        self,
        provider: pulumi.dynamic.ResourceProvider,
        name: str,
        props: dict[str, Any],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        with sdk_pickler_restored(), provider_serialized_once():
            super().__init__(provider, name, props, opts)
