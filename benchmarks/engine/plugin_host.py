"""`python -m benchmarks.engine.plugin_host ENGINE [--executor N]`: the "after" provider host.

The SDK's provider server (`pulumi.provider.experimental.server.main`: a `grpc.aio` server with no
worker pool, pulumi 3.272) serving the same create as the dynamic host does
(`workload.TimedPvrdmaProvider`), each blocking pyVmomi call run on a `ThreadPoolExecutor` of
`--executor` threads. A blocking call made directly in an async handler would stall the event loop
and serialise every call (docs/shared notes: 64 one-second creates took 16 s that way, 1.05 s on an
executor). This stands in for the real plugin (branch `plugin`) until it exists: the benchmark
takes any server command (`--server`), see benchmarks/engine/__init__.py.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pulumi.provider.experimental import provider as p
from pulumi.provider.experimental.property_value import PropertyValue
from pulumi.provider.experimental.server import main as serve

from benchmarks.engine.workload import TimedPvrdmaProvider
from components.resource_handlers import ConfigureRequest


def plain(value: PropertyValue) -> Any:
    """A PropertyValue as plain Python (what the dynamic provider's code expects)."""
    inner = value.value
    if isinstance(inner, dict):
        return {k: plain(v) for k, v in inner.items()}
    if isinstance(inner, list | tuple):
        return [plain(v) for v in inner]
    return inner


def wrapped(value: Any) -> PropertyValue:
    if isinstance(value, dict):
        return PropertyValue({k: wrapped(v) for k, v in value.items()})
    if isinstance(value, list):
        return PropertyValue([wrapped(v) for v in value])
    if isinstance(value, int) and not isinstance(value, bool):
        return PropertyValue(float(value))  # the protocol's numbers are doubles
    return PropertyValue(value)


class ExecutorProvider(p.Provider):
    """Async handlers; the blocking work on an executor of a size we choose."""

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vsphere")
        self._inner = TimedPvrdmaProvider()

    async def configure(self, request: p.ConfigureRequest) -> p.ConfigureResponse:
        raw = {key: plain(value) for key, value in request.args.items()}
        self._inner.configure(ConfigureRequest(raw))
        # No creates during preview, no secrets to unwrap (as the dynamic host answers).
        return p.ConfigureResponse(accept_secrets=False, supports_preview=False)

    async def check(self, request: p.CheckRequest) -> p.CheckResponse:
        news = {key: plain(value) for key, value in request.new_inputs.items()}
        result = await asyncio.get_running_loop().run_in_executor(self._pool, self._inner.check, {}, news)
        return p.CheckResponse(
            inputs={k: wrapped(v) for k, v in result.inputs.items()},
            failures=[p.CheckFailure(f.property, f.reason) for f in result.failures],
        )

    async def create(self, request: p.CreateRequest) -> p.CreateResponse:
        props = {key: plain(value) for key, value in request.properties.items()}
        result = await asyncio.get_running_loop().run_in_executor(self._pool, self._inner.create, props)
        return p.CreateResponse(
            resource_id=result.id, properties={k: wrapped(v) for k, v in (result.outs or {}).items()}
        )


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--executor", type=int, default=64)
    known, rest = parser.parse_known_args(args)
    # server.main parses sys.argv itself (the engine's address is its one positional argument).
    sys.argv = [sys.argv[0], *rest]
    serve(rest, "0.0.1", ExecutorProvider(known.executor))


if __name__ == "__main__":
    main()
