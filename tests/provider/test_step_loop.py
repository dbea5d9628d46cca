"""Issue 44: the plugin never stalls the engine's step loop, `cancel` drops queued work only, and
the engine's own flags (`--tracing ENDPOINT`) do not hide the engine's address.

The real plugin process, the real vCenter simulator harness with a delay on `QueryOptions` (each
`PvrdmaHostSettings` create blocks on it twice: benchmarks/engine/workload.py)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import provider_pb2

from benchmarks.engine import processes, step_loop
from benchmarks.engine.workload import DELAYED_METHOD, inputs, vsphere_config
from provider.main import parse_args
from stacks import PROJECT_DIR
from tests.provider.plugin_process import configure, running_plugin, urn
from tests.provider.rpc import Lifecycle
from tests.real_parts import unavailable

PVRDMA = "gpucluster:vsphere:PvrdmaHostSettings"
ROTATION = "gpucluster:kubernetes:JoinTokenRotation"
DELAY_MS = 3000
STEP_LOOP_BOUND_S = 1.0
"""The issue's bound for a Check or a Diff with every operation thread busy (measured: ~2 ms;
before the fix the first Check waited 17 s behind the queue, BENCHMARKS.md)."""


def _harness() -> None:
    if shutil.which("go") is not None:
        subprocess.run(["bash", str(PROJECT_DIR / "scripts" / "build-vcsim.sh")], check=False, capture_output=True)
    if not step_loop.HARNESS.exists():
        unavailable("vCenter simulator", "build/vcsim-harness is missing (bash scripts/build-vcsim.sh)")


@pytest.fixture(scope="module")
def slow_vcenter() -> Iterator[str]:
    _harness()
    process, url = processes.start_announcing(
        [str(step_loop.HARNESS), "-port", "0", "-exit-on-stdin-eof", "-method-delay", f"{DELAYED_METHOD}={DELAY_MS}"],
        processes.vcsim_url_line,
        cwd=PROJECT_DIR,
    )
    try:
        yield url
    finally:
        processes.stop(process)


def test_check_and_diff_answer_within_a_second_while_the_pool_is_saturated() -> None:
    _harness()
    result = step_loop.measure(pool=16, creates=48, probes=3, delay_ms=DELAY_MS)

    assert result.worst_s < STEP_LOOP_BOUND_S, result.lines()
    assert result.in_flight >= 16, f"the pool was not saturated while probing: {result.lines()}"


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


def test_cancel_drops_queued_operations_and_lets_running_ones_finish(slow_vcenter: str) -> None:
    config = {k.split(":", 1)[-1]: v for k, v in vsphere_config(slow_vcenter).items()}
    with running_plugin(with_engine=False) as plugin:
        configure(plugin.stub, {**config, "maxConcurrentOperations": "2"})
        requests = []
        for i in range(6):
            checked = plugin.stub.Check(
                provider_pb2.CheckRequest(urn=urn(PVRDMA, f"c{i}"), olds=_struct({}), news=_struct(inputs(i)))
            )
            requests.append(provider_pb2.CreateRequest(urn=urn(PVRDMA, f"c{i}"), properties=checked.inputs))

        def create(request: Any) -> str:
            try:
                return str(plugin.stub.Create(request, timeout=60).id)
            except grpc.RpcError as exc:
                return f"error: {exc.details()}"

        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(create, r) for r in requests]
            time.sleep(1.5)  # two creates running (each ~6 s), four queued
            plugin.stub.Cancel(empty_pb2.Empty())
            outcomes = [f.result(timeout=60) for f in futures]

    finished = [o for o in outcomes if not o.startswith("error")]
    dropped = [o for o in outcomes if "cancelled" in o]
    assert len(finished) == 2, outcomes
    assert len(dropped) == 4, outcomes


def test_the_engines_flags_before_its_address_do_not_hide_the_engine() -> None:
    """pulumi/pulumi plugin.go passes `[--logtostderr] [-v=N] [--tracing ENDPOINT] ADDRESS`; the
    old entry point took ENDPOINT for the engine, and every log line went there."""
    assert parse_args(["--logtostderr", "-v=9", "--tracing", "http://127.0.0.1:9/spans", "127.0.0.1:5"]).engine == (
        "127.0.0.1:5"
    )
    with running_plugin(engine_flags=["--logtostderr", "-v=9", "--tracing", "http://127.0.0.1:9/spans"]) as plugin:
        configure(plugin.stub, {"vsphereServer": None, "user": None, "password": None})
        rotation = Lifecycle(plugin.stub, ROTATION, "join-token-rotation")
        id_, outs, _ = rotation.create({"ttl_hours": 24, "issued_at": None, "expires_at": None})
        rotation.delete(id_, outs)
        assert f"JoinTokenRotation {id_}: nothing to delete (a timestamp leaves nothing behind)" in plugin.engine_log


READ_DELAYS = "FindByUuid=3000,RetrieveProperties=3000,RetrievePropertiesEx=3000,RefreshGraphicsManager=3000"
"""The reads a Check or Diff of ours may make (a template copy's drift, a verified host's graphics
mode), each answered 3 s late: a vCenter under load."""


@pytest.fixture(scope="module")
def slow_reads() -> Iterator[str]:
    _harness()
    process, url = processes.start_announcing(
        [str(step_loop.HARNESS), "-port", "0", "-exit-on-stdin-eof", "-method-delay", READ_DELAYS],
        processes.vcsim_url_line,
        cwd=PROJECT_DIR,
    )
    try:
        yield url
    finally:
        processes.stop(process)


def test_the_checks_and_diffs_that_read_vcenter_answer_within_a_second_when_it_is_slow(slow_reads: str) -> None:
    """Issue 52 item 4: `TemplateReplica.diff` reads the live copy (drift) and `HostGraphicsMode.check`
    with manage=false reads the host's graphics mode, both on the engine's serial step loop: every
    registration after them waits. Each read gets a step-loop budget and is skipped past it."""
    config = {k.split(":", 1)[-1]: v for k, v in vsphere_config(slow_reads).items()}
    replica_inputs = {
        "name": "gold-copy",
        "source_uuid": "4213a1f2-0000-0000-0000-000000000001",
        "source_name": "gold",
        "host_id": "host-21",
        "host_name": "DC0_C0_H0",
        "datastore_id": "datastore-1",
        "resource_pool_id": "resgroup-1",
        "linked": True,
        "snapshot_name": "base",
        "stack": "test",
    }
    with running_plugin(with_engine=False) as plugin:
        configure(plugin.stub, config)
        graphics = Lifecycle(plugin.stub, "gpucluster:vsphere:HostGraphicsMode", "graphics-DC0_C0_H0")
        replica = Lifecycle(plugin.stub, "gpucluster:vsphere:TemplateReplica", "copy-DC0_C0_H0")
        timed: dict[str, float] = {}
        for name, call in (
            ("HostGraphicsMode check", lambda: graphics.check({"host_name": "DC0_C0_H0", "manage": False})),
            (
                "TemplateReplica diff",
                lambda: replica.diff("4213a1f2-0000-0000-0000-0000000000aa", replica_inputs, replica_inputs),
            ),
        ):
            started = time.monotonic()
            call()
            timed[name] = time.monotonic() - started

    assert all(seconds < STEP_LOOP_BOUND_S for seconds in timed.values()), timed
