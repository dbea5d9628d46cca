"""The Pulumi engine's gRPC service as each CLI release serves it to the program, for the version ask.

A real gRPC server on loopback with the methods the release has, under their names then
(pulumi/pulumi, proto/pulumi/engine.proto):
- before 3.216.0: no version RPC; gRPC answers any method the server lacks UNIMPLEMENTED, as the
  Go server of those CLIs does;
- 3.216.x: `CheckPulumiVersion` (PR 21429), so `RequirePulumiVersion` is still UNIMPLEMENTED;
- 3.217.0 and later: `RequirePulumiVersion` (PR 21528; same request, field 1 `pulumi_version_range`).
The check is the engine's (sdk/go/common/resource/plugin/plugin.go, `validatePulumiVersionRange`):
blang/semver's range syntax (comparators AND-ed by spaces, OR-ed by `||`), a Go error that gRPC
sends as UNKNOWN with the text "Pulumi CLI version V does not satisfy the version range \"R\"".
`Log` is served by every release (the program's `pulumi.log`).
"""

from __future__ import annotations

import contextlib
import operator
import re
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import empty_pb2
from pulumi.runtime.proto import engine_pb2, engine_pb2_grpc

Release = tuple[int, int, int]
_COMPARATORS: dict[str, Callable[[Release, Release], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "!": operator.ne,
    "=": operator.eq,
    "": operator.eq,
}


def release(version: str) -> Release:
    major, minor, patch = (int(part) for part in version.split("."))
    return major, minor, patch


def satisfies(version: str, version_range: str) -> bool:
    """blang/semver `ParseRange` for plain releases; anything else is refused, not guessed."""
    cli = release(version)
    for alternative in version_range.split("||"):
        comparators = alternative.split()
        if not comparators:
            raise ValueError(f"empty alternative in version range {version_range!r}")
        held = True
        for comparator in comparators:
            match = re.fullmatch(r"(>=|<=|>|<|!|=|)(\d+\.\d+\.\d+)", comparator)
            if match is None:
                raise ValueError(f"this stand-in parses plain comparators only, not {comparator!r}")
            held &= _COMPARATORS[match[1]](cli, release(match[2]))
        if held:
            return True
    return False


class CliEngine:
    """The engine of Pulumi CLI `version`: what it answers, and what the program asked and logged."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.asked: list[tuple[str, str]] = []
        self.logged: list[str] = []
        self._lock = threading.Lock()

    @property
    def version_rpc(self) -> str | None:
        if release(self.version) >= (3, 217, 0):
            return "RequirePulumiVersion"
        if release(self.version) >= (3, 216, 0):
            return "CheckPulumiVersion"
        return None

    def _check(self, method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            with self._lock:
                self.asked.append((method, request.pulumi_version_range))
            if not satisfies(self.version, request.pulumi_version_range):
                context.abort(
                    grpc.StatusCode.UNKNOWN,
                    f'Pulumi CLI version {self.version} does not satisfy the version range "{request.pulumi_version_range}"',
                )
            return engine_pb2.RequirePulumiVersionResponse()

        return handle

    def _log(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self.logged.append(request.message)
        return empty_pb2.Empty()

    def handlers(self) -> grpc.GenericRpcHandler:
        methods = {
            "Log": grpc.unary_unary_rpc_method_handler(
                self._log,
                request_deserializer=engine_pb2.LogRequest.FromString,
                response_serializer=empty_pb2.Empty.SerializeToString,
            )
        }
        if self.version_rpc is not None:
            # 3.216's CheckPulumiVersionRequest has the same single field as the later message.
            methods[self.version_rpc] = grpc.unary_unary_rpc_method_handler(
                self._check(self.version_rpc),
                request_deserializer=engine_pb2.RequirePulumiVersionRequest.FromString,
                response_serializer=engine_pb2.RequirePulumiVersionResponse.SerializeToString,
            )
        return grpc.method_handlers_generic_handler("pulumirpc.Engine", methods)


@contextlib.contextmanager
def serving(engine: CliEngine) -> Iterator[engine_pb2_grpc.EngineStub]:
    """The engine on a loopback port, and the SDK's client for it as `settings.Settings` makes one."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((engine.handlers(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield engine_pb2_grpc.EngineStub(channel)
    finally:
        channel.close()
        server.stop(grace=None)
