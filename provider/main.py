"""Start the plugin's gRPC server (provider/__main__.py calls this)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import grpc
from pulumi.runtime import settings as runtime_settings
from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
from pulumi.runtime.proto import engine_pb2_grpc, provider_pb2_grpc

from provider.errors import CleanErrorsServicer
from provider.server import VERSION, GpuclusterProvider


class EngineLog:
    """The engine's Log service for `pulumi.log` in the handlers: the engine shows these lines in
    the update's output, while it hides a plugin's own stdout and stderr (pulumi/pulumi
    sdk/go/common/resource/plugin/plugin.go). A line the engine cannot take (it went away, or a
    benchmark drives the plugin without one) goes to stderr and never fails the operation."""

    def __init__(self, address: str) -> None:
        self._stub = engine_pb2_grpc.EngineStub(grpc.insecure_channel(address, options=_GRPC_CHANNEL_OPTIONS))

    def Log(self, request: Any) -> Any:  # the name pulumi.log calls
        try:
            return self._stub.Log(request, timeout=10)
        except grpc.RpcError:
            print(request.message, file=sys.stderr)
            return None


def main(args: list[str]) -> None:
    """`args`: the engine's address first, as the engine passes it (then optional flags)."""
    engine = next((a for a in args if not a.startswith("-")), None)
    if engine:
        runtime_settings.configure(runtime_settings.Settings(project=None, stack=None, engine=EngineLog(engine)))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))


async def _serve(args: list[str]) -> None:
    """What the SDK's `server.main` does (pulumi/provider/experimental/server.py), with our
    servicer: a failed call shows its handler's one-line reason (provider/errors.py)."""
    engine = next((a for a in args if not a.startswith("-")), "")
    server = grpc.aio.server(options=_GRPC_CHANNEL_OPTIONS)
    servicer = CleanErrorsServicer(args, VERSION, GpuclusterProvider(), engine_address=engine)
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(servicer, server)
    port = server.add_insecure_port(address="127.0.0.1:0")
    await server.start()
    sys.stdout.buffer.write(f"{port}\n".encode())
    sys.stdout.buffer.flush()
    await server.wait_for_termination()
