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
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator
from typing import Any

import pulumi
import pulumi.dynamic


@contextlib.contextmanager
def sdk_pickler_restored() -> Iterator[None]:
    """Put back the pure-Python pickler's methods that `serialize_provider` replaces."""
    pickler: Any = pickle._Pickler
    saved = (pickler._batch_setitems, pickler.save_dict)
    try:
        yield
    finally:
        pickler._batch_setitems, pickler.save_dict = saved


class DynamicResource(pulumi.dynamic.Resource):
    """`pulumi.dynamic.Resource` that leaves the process's pickler as it found it."""

    def __init__(
        self,
        provider: pulumi.dynamic.ResourceProvider,
        name: str,
        props: dict[str, Any],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        with sdk_pickler_restored():
            super().__init__(provider, name, props, opts)
