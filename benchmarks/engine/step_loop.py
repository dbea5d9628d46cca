"""`python -m benchmarks.engine.step_loop`: how long the engine's Check and Diff wait on the
gpucluster plugin while its operations pool is full.

The engine calls Check (and Diff) on its step-generation loop and waits for each answer before it
looks at the next registration (provider/pools.py has the sources). This starts the vCenter
simulator harness with a delay on `QueryOptions` (each `PvrdmaHostSettings` create blocks on it
twice: `benchmarks/engine/workload.py`), starts the real plugin process (`python provider/
ADDRESS`, as the Python language host runs it), configures it with a pool of `--pool` threads,
and sends `--creates` creates (three times the pool: the pool full and as much again queued).
Once every thread is busy it times `--probes` Check calls and Diff calls, one at a time, as the
engine sends them. Prints one line per figure; `--json` prints them as data.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import grpc
from google.protobuf import struct_pb2
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from benchmarks.engine import processes
from benchmarks.engine.concurrency import HARNESS, PLUGIN_TYPE
from benchmarks.engine.drive import ENGINE_ADDRESS
from benchmarks.engine.workload import CALLS_PER_CREATE, DELAYED_METHOD, inputs, vsphere_config
from stacks import PROJECT_DIR

PROBE_INTERVAL_S = 0.5
PLUGIN_COMMAND = (sys.executable, str(PROJECT_DIR / "provider"), ENGINE_ADDRESS)


@dataclass(frozen=True)
class StepLoopLatency:
    pool: int
    creates: int
    create_s: float
    """How long one create blocks on the simulator (its QueryOptions calls times the delay)."""
    check_s: list[float]
    diff_s: list[float]
    in_flight: int
    """Creates not yet answered when the last probe ended: the pool was still full."""

    @property
    def worst_s(self) -> float:
        return max(self.check_s + self.diff_s)

    def lines(self) -> list[str]:
        return [
            f"plugin pool {self.pool}, {self.creates} creates of ~{self.create_s:g} s each "
            f"({self.in_flight} still in flight at the end)",
            f"Check: median {statistics.median(self.check_s) * 1000:.0f} ms, worst {max(self.check_s) * 1000:.0f} ms "
            f"({len(self.check_s)} calls)",
            f"Diff: median {statistics.median(self.diff_s) * 1000:.0f} ms, worst {max(self.diff_s) * 1000:.0f} ms "
            f"({len(self.diff_s)} calls)",
        ]


def _struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(dict(values))
    return message


async def _probe(
    address: str, config: Mapping[str, str], pool: int, creates: int, probes: int, settle_s: float
) -> tuple[list[float], list[float], int]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = provider_pb2_grpc.ResourceProviderStub(channel)
        args = {key.split(":", 1)[-1]: value for key, value in config.items()} | {"maxConcurrentOperations": str(pool)}
        await stub.Configure(
            provider_pb2.ConfigureRequest(args=_struct(args), acceptSecrets=True, acceptResources=True)
        )

        def urn(i: int) -> str:
            return f"urn:pulumi:bench::engine-benchmark::{PLUGIN_TYPE}::r{i}"

        checked = [
            await stub.Check(provider_pb2.CheckRequest(urn=urn(i), olds=_struct({}), news=_struct(inputs(i))))
            for i in range(creates)
        ]
        calls = [
            stub.Create(provider_pb2.CreateRequest(urn=urn(i), properties=checked[i].inputs, timeout=600))
            for i in range(creates)
        ]
        tasks = [asyncio.ensure_future(call) for call in calls]
        await asyncio.sleep(settle_s)  # every create sent; the pool's threads are all taken by now
        check_s: list[float] = []
        diff_s: list[float] = []
        probe_inputs = _struct(inputs(0))
        for n in range(probes):
            started = time.perf_counter()
            await stub.Check(provider_pb2.CheckRequest(urn=urn(creates + n), olds=_struct({}), news=probe_inputs))
            check_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            await stub.Diff(
                provider_pb2.DiffRequest(id=f"probe{n}", urn=urn(creates + n), olds=probe_inputs, news=probe_inputs)
            )
            diff_s.append(time.perf_counter() - started)
            await asyncio.sleep(PROBE_INTERVAL_S)  # probes spread over the saturated stretch
        in_flight = sum(1 for task in tasks if not task.done())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return check_s, diff_s, in_flight


def measure(*, pool: int, creates: int, probes: int, delay_ms: int, settle_s: float = 1.0) -> StepLoopLatency:
    simulator, url = processes.start_announcing(
        [str(HARNESS), "-port", "0", "-exit-on-stdin-eof", "-method-delay", f"{DELAYED_METHOD}={delay_ms}"],
        processes.vcsim_url_line,
        cwd=PROJECT_DIR,
    )
    try:
        plugin, port = processes.start_announcing(PLUGIN_COMMAND, processes.port_line, cwd=PROJECT_DIR)
        try:
            check_s, diff_s, in_flight = asyncio.run(
                _probe(f"127.0.0.1:{port}", vsphere_config(url), pool, creates, probes, settle_s)
            )
        finally:
            processes.stop(plugin)
    finally:
        processes.stop(simulator)
    return StepLoopLatency(pool, creates, CALLS_PER_CREATE * delay_ms / 1000, check_s, diff_s, in_flight)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engine.step_loop", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=64, help="the plugin's maxConcurrentOperations")
    parser.add_argument("--creates", type=int, help="creates sent at once (default: 3 x pool)")
    parser.add_argument("--probes", type=int, default=10, help="Check and Diff calls timed, 0.5 s apart")
    parser.add_argument(
        "--settle-s", type=float, default=5.0, help="wait after sending the creates (all at once) before probing"
    )
    parser.add_argument("--delay-ms", type=int, default=5000, help=f"simulator delay per {DELAYED_METHOD} call")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(
        pool=args.pool,
        creates=args.creates or 3 * args.pool,
        probes=args.probes,
        delay_ms=args.delay_ms,
        settle_s=args.settle_s,
    )
    if args.json:
        print(json.dumps(asdict(result) | {"worst_s": result.worst_s}, indent=2))
    else:
        print("\n".join(result.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
