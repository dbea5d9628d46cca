"""The gpucluster plugin as the engine runs it: its own process (`python provider/ ENGINE`), the
port it prints, the SDK's generated gRPC stubs (pulumi.runtime.proto), and a stand-in for the
engine's Log service that keeps what the plugin logs.

Nothing here imports the plugin's code: the tests talk to the process only over gRPC.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2
from pulumi.provider.experimental.property_value import PropertyValue
from pulumi.runtime.proto import engine_pb2_grpc, provider_pb2, provider_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
STACK_URN = "urn:pulumi:test::vsphere-gpu-cluster::pulumi:pulumi:Stack::vsphere-gpu-cluster-test"


def urn(type_token: str, name: str) -> str:
    return f"urn:pulumi:test::vsphere-gpu-cluster::{type_token}::{name}"


class _EngineLog(engine_pb2_grpc.EngineServicer):
    def __init__(self) -> None:
        self.messages: list[str] = []
        self._lock = threading.Lock()

    def Log(self, request: Any, context: Any) -> Any:  # the service's method name
        with self._lock:
            self.messages.append(request.message)
        return empty_pb2.Empty()


@dataclass
class Plugin:
    stub: provider_pb2_grpc.ResourceProviderStub
    process: subprocess.Popen[bytes] = field(repr=False)
    engine_log: list[str] = field(default_factory=list)


@contextlib.contextmanager
def engine_log() -> Iterator[tuple[str, _EngineLog]]:
    servicer = _EngineLog()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    engine_pb2_grpc.add_EngineServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        server.stop(0)


@contextlib.contextmanager
def running_plugin(
    env: Mapping[str, str] | None = None, *, with_engine: bool = True, engine_flags: Sequence[str] = ()
) -> Iterator[Plugin]:
    """Start the plugin as the Python language host does for PulumiPlugin.yaml, with the engine
    address as its argument; stop it at the end. `env`: variables to set (or blank) for it.
    `with_engine=False`: an address nothing answers on (a benchmark driving the plugin alone).
    `engine_flags`: what the engine puts before the address (`--tracing ENDPOINT`, `-v=9`)."""
    with engine_log() as (address, log), tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "provider"), *engine_flags, address if with_engine else "127.0.0.1:9"],
            cwd=ROOT / "tests",  # not the repository root: the plugin must find its code itself
            stdout=subprocess.PIPE,
            stderr=stderr,  # a file, not a pipe: nothing reads it while the plugin runs
            env={**os.environ, **(env or {})},
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline().decode().strip()
            if not line.isdigit():
                process.kill()
                process.wait()
                stderr.seek(0)
                raise AssertionError(f"plugin printed {line!r}, not a port; stderr: {stderr.read().decode()}")
            channel = grpc.insecure_channel(f"127.0.0.1:{line}")
            grpc.channel_ready_future(channel).result(timeout=START_TIMEOUT_S)
            yield Plugin(provider_pb2_grpc.ResourceProviderStub(channel), process, log.messages)
            channel.close()
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def marshal(values: Mapping[str, Any], secret: Collection[str] = ()) -> Any:
    """A property map as the engine sends it; `secret` keys as secrets."""
    return PropertyValue.marshal_map({k: _value(v).with_secret(k in secret) for k, v in values.items()})


def _value(value: Any) -> PropertyValue:
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return PropertyValue(value)
    if isinstance(value, int):
        return PropertyValue(float(value))
    if isinstance(value, Mapping):
        return PropertyValue({k: _value(v) for k, v in value.items()})
    return PropertyValue([_value(v) for v in value])


def unmarshal(struct: Any) -> tuple[dict[str, Any], set[str]]:
    """Plain values and the keys that came back secret."""
    props = PropertyValue.unmarshal_map(struct)
    return {k: _plain(v) for k, v in props.items()}, {k for k, v in props.items() if v.contains_secret()}


def _plain(value: PropertyValue) -> Any:
    inner = value.value
    if isinstance(inner, Mapping):
        return {k: _plain(v) for k, v in inner.items()}
    if isinstance(inner, tuple):
        return [_plain(v) for v in inner]
    return inner


def configure(stub: Any, args: Mapping[str, Any], secret: Collection[str] = ()) -> Any:
    return stub.Configure(
        provider_pb2.ConfigureRequest(args=marshal(args, secret), acceptSecrets=True, acceptResources=True)
    )


def vcsim_connection(url_port: int, user: str, password: str, **extra: Any) -> dict[str, Any]:
    """The provider resource's inputs for the simulator (components/gpucluster_resource.py)."""
    return {
        "vsphereServer": f"http://127.0.0.1:{url_port}",
        "user": user,
        "password": password,
        "allowUnverifiedSsl": "true",
        **extra,
    }
