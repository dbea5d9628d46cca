"""Drive a provider host over gRPC as the engine does during `pulumi up`, and time it.

For each new resource the engine calls the provider's Check and then Create (a resource with no old
state gets no Diff; pulumi/pulumi pkg/resource/deploy/step_generator.go: Diff runs only for a
resource with old state), after one Configure per provider. A second pass, an `up` with nothing to
change, calls Check and Diff on each created resource. At most `parallel` resource operations are in
flight at once, as `pulumi up --parallel` allows. The host process is started afresh per run and is
the engine's own protocol peer: the client stubs are the SDK's (`pulumi.runtime.proto`, generated
from the engine's provider.proto).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from benchmarks.engine import processes
from benchmarks.engine.workload import FINISHED, STARTED, max_overlap

ENGINE_ADDRESS = "127.0.0.1:1"
"""What the host is given as the engine's address: nothing listens there. A plugin dials the engine
only to log or to register resources (Construct/Call); custom-resource CRUD never does."""


@dataclass(frozen=True)
class HostSpec:
    """A provider host to measure: its command, the type token it serves, extra inputs it needs."""

    name: str
    command: tuple[str, ...]
    type_token: str
    extra_inputs: Mapping[str, Any]
    """The dynamic host needs the pickled provider in every resource's inputs (`__provider`)."""
    provider_inputs: Mapping[str, str] | None = None
    """For a provider plugin configured by an explicit provider resource (the gpucluster plugin):
    Configure's `args` are that resource's inputs, named without the config's package prefix
    (`vsphereServer`, `user`, `password`: provider/server.py `_CONNECTION_KEYS`), plus these (e.g.
    `maxConcurrentOperations`). None: the stack config's keys as they are (the dynamic host)."""


@dataclass(frozen=True)
class RunResult:
    host: str
    parallel: int
    operations: int
    create_wall_s: float
    creates_per_s: float
    max_concurrency: int | None
    """Most creates overlapping inside the host (from the outputs' timestamps); None if it gave none."""
    mean_concurrency: float | None
    """Sum of the creates' own durations over the wall time of the create phase."""
    mean_create_s: float | None
    diff_wall_s: float
    diffs_per_s: float

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def _struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(dict(values))
    return message


def _plain(message: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(message)


async def _drive(
    address: str, spec: HostSpec, config: Mapping[str, str], inputs: Sequence[Mapping[str, Any]], parallel: int
) -> RunResult:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = provider_pb2_grpc.ResourceProviderStub(channel)
        args: dict[str, Any] = dict(config)
        if spec.provider_inputs is not None:
            args = {key.split(":", 1)[-1]: value for key, value in config.items()} | dict(spec.provider_inputs)
        await stub.Configure(
            provider_pb2.ConfigureRequest(
                variables=dict(config), args=_struct(args), acceptSecrets=True, acceptResources=True
            )
        )
        gate = asyncio.Semaphore(parallel)
        urns = [f"urn:pulumi:bench::engine-benchmark::{spec.type_token}::r{i}" for i in range(len(inputs))]

        async def create(urn: str, news: Mapping[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
            async with gate:
                checked = await stub.Check(
                    provider_pb2.CheckRequest(urn=urn, olds=_struct({}), news=_struct({**spec.extra_inputs, **news}))
                )
                if checked.failures:
                    raise RuntimeError(f"{urn}: Check failed: {checked.failures}")
                made = await stub.Create(provider_pb2.CreateRequest(urn=urn, properties=checked.inputs, timeout=600))
                return made.id, _plain(checked.inputs), _plain(made.properties)

        started = time.perf_counter()
        created = await asyncio.gather(*(create(urn, news) for urn, news in zip(urns, inputs, strict=True)))
        create_wall = time.perf_counter() - started

        async def unchanged(urn: str, id_: str, olds: dict[str, Any], outs: dict[str, Any]) -> None:
            async with gate:
                checked = await stub.Check(provider_pb2.CheckRequest(urn=urn, olds=_struct(olds), news=_struct(olds)))
                await stub.Diff(provider_pb2.DiffRequest(id=id_, urn=urn, olds=_struct(outs), news=checked.inputs))

        started = time.perf_counter()
        await asyncio.gather(
            *(unchanged(urn, i, olds, outs) for urn, (i, olds, outs) in zip(urns, created, strict=True))
        )
        diff_wall = time.perf_counter() - started

    stamps = [(outs[STARTED], outs[FINISHED]) for _, _, outs in created if STARTED in outs and FINISHED in outs]
    busy = sum(end - start for start, end in stamps)
    return RunResult(
        host=spec.name,
        parallel=parallel,
        operations=len(inputs),
        create_wall_s=create_wall,
        creates_per_s=len(inputs) / create_wall,
        max_concurrency=max_overlap(stamps) if stamps else None,
        mean_concurrency=busy / create_wall if stamps else None,
        mean_create_s=busy / len(stamps) if stamps else None,
        diff_wall_s=diff_wall,
        diffs_per_s=len(inputs) / diff_wall,
    )


def run(
    spec: HostSpec, config: Mapping[str, str], inputs: Sequence[Mapping[str, Any]], parallel: int, cwd: Path
) -> RunResult:
    """Start the host, drive `inputs` through it with `parallel` operations in flight, stop it."""
    process, port = processes.start_announcing(spec.command, processes.port_line, cwd=cwd)
    try:
        return asyncio.run(_drive(f"127.0.0.1:{port}", spec, config, inputs, parallel))
    finally:
        processes.stop(process)


def python_module(module: str, *args: str) -> tuple[str, ...]:
    """`python -m module ARGS ENGINE`, with this interpreter (the project's venv)."""
    return (sys.executable, "-m", module, *args, ENGINE_ADDRESS)
