"""Start the plugin's gRPC server (provider/__main__.py calls this).

The engine starts a plugin with its own flags first, then the plugin's arguments (the engine's
address): `[--logtostderr] [-v=N] [--tracing ENDPOINT] ADDRESS` (pulumi/pulumi
sdk/go/common/resource/plugin/plugin.go, `buildPluginArguments`: `"--tracing", endpoint` as two
arguments). The SDK's own `main` (pulumi/provider/experimental/server.py) reads `sys.argv` with an
argparse that knows no `--tracing`, so under `pulumi up --tracing` it would take the endpoint for the
engine's address; `parse_args` knows every flag the engine passes, and `serve` is the SDK's
server loop with the address parsed here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from dataclasses import dataclass
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


@dataclass(frozen=True)
class PluginArgs:
    engine: str
    tracing: str | None = None
    verbose: int = 0


def parse_args(args: list[str]) -> PluginArgs:
    """The arguments as the engine passes them (module docstring)."""
    parser = argparse.ArgumentParser(prog="pulumi-resource-gpucluster", add_help=False)
    parser.add_argument("engine", help="the engine's gRPC address")
    parser.add_argument("--tracing", help="the engine's tracing endpoint (not used by this plugin)")
    parser.add_argument("-v", type=int, default=0, dest="verbose")
    parser.add_argument("--logtostderr", "-logtostderr", action="store_true")
    parser.add_argument("--logflow", action="store_true")
    known, _ = parser.parse_known_args(args)
    return PluginArgs(engine=known.engine, tracing=known.tracing, verbose=known.verbose)


async def serve(args: list[str], engine: str, provider: GpuclusterProvider) -> None:
    """The SDK's serve loop (pulumi/provider/experimental/server.py `main`), with our address and
    our servicer: a failed call shows its handler's one-line reason (provider/errors.py)."""
    server = grpc.aio.server(options=_GRPC_CHANNEL_OPTIONS)
    servicer = CleanErrorsServicer(args, VERSION, provider, engine_address=engine)
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(servicer, server)
    port = server.add_insecure_port(address="127.0.0.1:0")
    await server.start()
    sys.stdout.buffer.write(f"{port}\n".encode())
    sys.stdout.buffer.flush()
    await server.wait_for_termination()


def main(args: list[str]) -> None:
    parsed = parse_args(args)
    runtime_settings.configure(runtime_settings.Settings(project=None, stack=None, engine=EngineLog(parsed.engine)))
    with contextlib.suppress(KeyboardInterrupt):  # the engine's interrupt when it closes the plugin
        asyncio.run(serve(args, parsed.engine, GpuclusterProvider()))
