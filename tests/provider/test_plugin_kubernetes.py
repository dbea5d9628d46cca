"""Kubernetes-side kinds through the gpucluster plugin's own process: ApiServerReady against the
kube-apiserver double, secrets kept secret, logs on the engine's Log service, unknown types
refused, and the worker pool: 32 creates that each block for a second run side by side."""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from tests.components.k8s.node_bootstrap.apiserver_double import LOOPBACK, FakeApiServer, Pki, make_pki, serve
from tests.provider.plugin_process import Plugin, configure, running_plugin
from tests.provider.rpc import Lifecycle, no_change

READY = "gpucluster:kubernetes:ApiServerReady"
GATE = "gpucluster:kubernetes:RolloutGate"
ROTATION = "gpucluster:kubernetes:JoinTokenRotation"

needs_openssl = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="the openssl CLI makes the throwaway certificates"
)


@pytest.fixture(scope="module")
def k8s_plugin(plugin: Plugin) -> Plugin:
    configure(plugin.stub, {"vsphereServer": None, "user": None, "password": None})
    return plugin


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def api_server(pki: Pki) -> Iterator[FakeApiServer]:
    with serve(pki) as state:
        yield state


def _ready_inputs(port: int, pki: Pki, timeout_seconds: float = 5) -> dict[str, Any]:
    return {
        "host": LOOPBACK,
        "port": port,
        "ca_certificate_pem": pki.ca_pem,
        "client_certificate_pem": pki.admin.certificate_pem,
        "client_key_pem": pki.admin.key_pem,
        "timeout_seconds": timeout_seconds,
        "poll_interval_seconds": 0.05,
        "url": None,
    }


@needs_openssl
def test_api_server_ready_waits_for_the_double_and_keeps_the_key_secret(
    k8s_plugin: Plugin, api_server: FakeApiServer, pki: Pki
) -> None:
    ready = Lifecycle(k8s_plugin.stub, READY, "api-server-ready")
    inputs = ready.checked(_ready_inputs(api_server.port, pki), secret={"client_key_pem"})
    api_server.bind_after_reviews = 2  # kubeadm binds the admin group a little later

    id_, outs, secret = ready.create(inputs, secret={"client_key_pem"})

    assert id_ == f"{LOOPBACK}:{api_server.port}"
    assert api_server.reviews == 3  # waited through two refusals
    assert outs["url"] == f"https://{LOOPBACK}:{api_server.port}/readyz"
    assert secret == {"client_key_pem"}  # a secret input is a secret output
    read_id, read = ready.read(id_, outs)
    assert read_id == id_
    assert no_change(ready.diff(id_, read, inputs))
    ready.delete(id_, outs)


def test_rollout_gate_lifecycle_keeps_the_kubeconfig_secret(k8s_plugin: Plugin) -> None:
    gate = Lifecycle(k8s_plugin.stub, GATE, "gate-worker-1")
    props = {
        "node_name": "worker-1",
        "generation": "g1",
        "kubernetes_version": "1.31.4",
        "previous_node": "",
        "kubeconfig": "apiVersion: v1\nkind: Config\n",
    }
    inputs = gate.checked(props, secret={"kubeconfig"})

    id_, outs, secret = gate.create(inputs, secret={"kubeconfig"})

    assert id_ == "worker-1@g1"
    assert secret == {"kubeconfig"}
    assert outs["generation"] == "g1"
    assert no_change(gate.diff(id_, outs, inputs))
    rolled = gate.diff(id_, outs, {**inputs, "generation": "g2"})
    assert list(rolled.replaces) == ["generation"] and rolled.deleteBeforeReplace
    gate.delete(id_, outs)


def test_handlers_log_through_the_engines_log_service(k8s_plugin: Plugin) -> None:
    rotation = Lifecycle(k8s_plugin.stub, ROTATION, "join-token-rotation")
    id_, outs, _ = rotation.create({"ttl_hours": 24, "issued_at": None, "expires_at": None})
    assert outs["issued_at"] and outs["expires_at"] > outs["issued_at"]

    rotation.delete(id_, outs)

    assert f"JoinTokenRotation {id_}: nothing to delete (a timestamp leaves nothing behind)" in k8s_plugin.engine_log


def test_without_an_engine_to_log_to_operations_still_succeed() -> None:
    """A benchmark drives the plugin with no engine behind the address: a log line it cannot
    deliver must not fail the operation (provider/main.py, EngineLog)."""
    with running_plugin(with_engine=False) as alone:
        configure(alone.stub, {})
        rotation = Lifecycle(alone.stub, ROTATION, "join-token-rotation")
        id_, outs, _ = rotation.create({"ttl_hours": 24, "issued_at": None, "expires_at": None})
        rotation.delete(id_, outs)  # logs "nothing to delete"


def test_an_unknown_type_is_refused_by_name(k8s_plugin: Plugin) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        Lifecycle(k8s_plugin.stub, "gpucluster:vsphere:Nope", "x").create({"a": "b"})
    assert "no resource type 'gpucluster:vsphere:Nope'" in refused.value.details()


# --- the worker pool --------------------------------------------------------------------------

BLOCKING_CREATES = 32
BLOCK_S = 1.0


def _closed_port() -> int:
    """A loopback port nothing listens on: ApiServerReady polls it for its whole timeout."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def _blocking_creates(plugin: Plugin, pki: Pki) -> tuple[float, list[str]]:
    """32 ApiServerReady creates at once, each waiting BLOCK_S for a server that never answers."""
    port = _closed_port()

    def one(i: int) -> str:
        ready = Lifecycle(plugin.stub, READY, f"ready-{i}")
        try:
            ready.create(_ready_inputs(port, pki, timeout_seconds=BLOCK_S), secret={"client_key_pem"})
        except grpc.RpcError as exc:
            return str(exc.details())
        return "created"

    started = time.monotonic()
    with ThreadPoolExecutor(BLOCKING_CREATES) as pool:
        answers = list(pool.map(one, range(BLOCKING_CREATES)))
    return time.monotonic() - started, answers


@needs_openssl
@pytest.mark.parametrize("pool_size", [64, 4])
def test_blocking_creates_run_side_by_side_up_to_the_pool_size(pki: Pki, pool_size: int) -> None:
    with running_plugin() as plugin:
        configure(plugin.stub, {"maxConcurrentOperations": pool_size})
        elapsed, answers = _blocking_creates(plugin, pki)

    # Each create really waited its second (ApiServerReady's verdict once its wait ran out), ...
    assert all("did not become ready within" in answer for answer in answers), answers[:2]
    waves = -(-BLOCKING_CREATES // min(pool_size, BLOCKING_CREATES))
    print(f"{BLOCKING_CREATES} creates blocking {BLOCK_S} s each, pool {pool_size}: {elapsed:.2f} s")
    # ... and they ran in ceil(32 / pool) waves: one second with a pool of 64 (the
    # dynamic provider host's four threads took eight).
    assert waves * BLOCK_S <= elapsed < waves * BLOCK_S + 1.5
