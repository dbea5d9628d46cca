"""The engine benchmark against real processes: the SDK's dynamic provider host and its provider
server, driven over gRPC against the vCenter simulator; the checkpoint saver and moto's S3 server;
and the deployment model's constants held to what was measured."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.engine import checkpoint, concurrency, processes
from benchmarks.engine.drive import run
from benchmarks.engine.state_size import SECRET_SIG, state_entry
from benchmarks.engine.workload import DELAYED_METHOD, inputs, max_overlap, vsphere_config
from stacks import PROJECT_DIR
from stacks.tools.plan.deploy_time import engine
from tests.real_parts import unavailable

DELAY_MS = 300


@pytest.fixture(scope="module")
def simulator_url() -> Iterator[str]:
    if shutil.which("go") is not None:
        subprocess.run(["bash", str(PROJECT_DIR / "scripts" / "build-vcsim.sh")], check=False, capture_output=True)
    if not concurrency.HARNESS.exists():
        unavailable("vCenter simulator", "build/vcsim-harness is missing (bash scripts/build-vcsim.sh)")
    process, url = processes.start_announcing(
        [str(concurrency.HARNESS), "-port", "0", "-exit-on-stdin-eof", "-method-delay", f"{DELAYED_METHOD}={DELAY_MS}"],
        processes.vcsim_url_line,
        cwd=PROJECT_DIR,
    )
    try:
        yield url
    finally:
        processes.stop(process)


def test_overlap_counts_what_runs_at_one_instant() -> None:
    assert max_overlap([]) == 0
    assert max_overlap([(0, 2), (1, 3), (2, 4)]) == 2  # an end and a start at 2 do not overlap
    assert max_overlap([(0, 5), (1, 2), (1, 3), (4, 6)]) == 3


def test_the_dynamic_host_runs_four_creates_at_once_whatever_parallel_says(simulator_url: str) -> None:
    work = [inputs(i) for i in range(8)]
    result = run(concurrency.dynamic_host(), vsphere_config(simulator_url), work, parallel=8, cwd=PROJECT_DIR)
    assert result.max_concurrency == 4
    # Two reads of the delayed option per create: each create blocks on vCenter for 2 x the delay.
    assert result.mean_create_s is not None and result.mean_create_s >= 2 * DELAY_MS / 1000
    assert result.create_wall_s >= 2 * 2 * DELAY_MS / 1000  # two rounds of four


@pytest.mark.parametrize("executor", [2, 8])
def test_the_provider_server_runs_as_many_as_its_executor(simulator_url: str, executor: int) -> None:
    work = [inputs(i) for i in range(8)]
    result = run(concurrency.plugin_host(executor), vsphere_config(simulator_url), work, parallel=8, cwd=PROJECT_DIR)
    assert result.max_concurrency == executor
    assert result.diffs_per_s > 0


def test_a_custom_server_command_gets_the_engine_address_last() -> None:
    spec = concurrency.custom_host("python -m provider --flag", "gpucluster:vsphere:X")
    assert spec.command[:3] == ("python", "-m", "provider") and spec.command[-1] == "127.0.0.1:1"
    assert spec.type_token == "gpucluster:vsphere:X" and spec.extra_inputs == {}


def test_the_real_plugin_server_is_configured_as_its_provider_resource_configures_it(simulator_url: str) -> None:
    """`--server "python provider"` (the gpucluster plugin, provider/__main__.py): its Configure reads
    the explicit provider's inputs (`vsphereServer`, `user`, `password`, `maxConcurrentOperations`),
    not the stack config's `vsphere:` keys, so every create failed with no vCenter configured."""
    spec = concurrency.custom_host(f"{sys.executable} provider", "gpucluster:vsphere:PvrdmaHostSettings", executor=2)
    work = [inputs(i) for i in range(4)]
    result = run(spec, vsphere_config(simulator_url), work, parallel=4, cwd=PROJECT_DIR)
    assert result.operations == 4 and result.diffs_per_s > 0
    # A pool of 2: two rounds of two creates, each blocking on vCenter for 2 x the delay.
    assert result.create_wall_s >= 2 * 2 * DELAY_MS / 1000


def test_the_models_provider_concurrency_is_the_measured_one() -> None:
    measured = json.loads(concurrency.MEASURED.read_text())
    assert measured["maxConcurrency"]["dynamic"] == engine.DYNAMIC_HOST_CONCURRENCY
    plugin = [runs for runs in measured["runs"] if runs["host"].startswith("plugin")]
    # The provider server reached its --parallel at every level: its executor is what bounds it.
    assert plugin and all(r["max_concurrency"] == r["parallel"] for r in plugin)


def test_the_models_checkpoint_costs_are_the_measured_ones() -> None:
    measured = json.loads(checkpoint.MEASURED.read_text())
    for backend in ("marshal", "file", "s3"):
        assert engine.SAVE_MS[backend] == (measured[backend]["fixedMs"], measured[backend]["perMbMs"])
    assert engine.measured_bytes_per_type() == measured["bytesPerType"]


class _Recorded:
    def __init__(self, **fields: object) -> None:
        self.__dict__.update(fields)


def test_a_dynamic_resource_keeps_its_pickled_provider_in_inputs_and_outputs() -> None:
    from pulumi.runtime import rpc

    resource = _Recorded(
        urn="urn:pulumi:s::p::pulumi-python:dynamic/vsphere:PvrdmaHostSettings::h1",
        type="pulumi-python:dynamic/vsphere:PvrdmaHostSettings",
        name="h1",
        custom=True,
        parent=None,
        provider=None,
        dependencies=[],
        property_dependencies={},
        source_position=None,
        inputs={
            "__provider": "p" * 3000,
            "host_name": "h1",
            "token": {rpc._special_sig_key: rpc._special_secret_sig, "value": "s" * 100},
        },
    )
    entry = state_entry(resource)
    assert entry["inputs"]["__provider"] == entry["outputs"]["__provider"] == "p" * 3000
    assert set(entry["inputs"]["token"]) == {SECRET_SIG, "ciphertext"}
    assert len(entry["inputs"]["token"]["ciphertext"]) > 100  # ciphertext outgrows the plaintext


def test_the_go_saver_writes_a_backup_then_the_new_state(tmp_path: Path) -> None:
    if shutil.which("go") is None and not checkpoint.SAVER.exists():
        unavailable("go", "no Go toolchain to build build/checkpoint-save (apt-get install golang-go)")
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps({"version": 3, "checkpoint": {"latest": {"resources": [{"urn": "u", "outputs": {"a": 1}}]}}})
    )
    out = tmp_path / "out"
    out.mkdir()
    found = checkpoint.go_save(state, str(out), 2)
    written = (out / "stack.json").read_text()
    assert found["bytes"] == len(written.encode()) and found["write_ms"] >= 0
    assert written.startswith('{\n    "checkpoint": {')  # indented by four spaces, as the engine writes
    assert (out / "stack.json.bak").read_text() == written  # the second save backed the first one up


def test_an_s3_save_copies_then_puts_on_moto() -> None:
    assert checkpoint.s3_write_ms(b"{}" * 1000, 2) > 0
