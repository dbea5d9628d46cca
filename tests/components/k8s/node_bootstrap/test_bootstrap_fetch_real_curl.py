"""The joining control-plane node's fetch of its encryption keys with the real curl, against the
HTTPS double of kube-apiserver (apiserver_double.py: the bootstrap-token authenticator, RBAC before
existence, Secrets in kube-system) on loopback, with the real openssl. The rest of the node is the
harness's (node_harness.py); only curl is the real one.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from components.k8s.join.control_plane import sealed_encryption_config_data
from components.k8s.join.token import NODE_BOOTSTRAP_GROUP
from components.k8s.node_bootstrap import UserDataRenderer
from components.k8s.node_bootstrap.control_plane_join import (
    CONTROL_PLANE_JOIN_GROUP,
    ENCRYPTION_CONFIG_SECRET,
    ControlPlaneJoin,
)
from components.k8s.node_bootstrap.paths import ENCRYPTION_CONFIG_PATH
from components.k8s.node_bootstrap.user_data import render_encryption_configuration
from tests.components.k8s.node_bootstrap.apiserver_double import FakeApiServer, make_pki, serve
from tests.components.k8s.node_bootstrap.node_harness import Node
from tests.components.k8s.node_bootstrap.test_bootstrap_script_runs import PKI, TOKEN, make_spec

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("bash", "curl", "openssl")), reason="needs bash, curl and openssl"
)

CP_TOKEN = "cpjoin.0123456789abcdef"
CERTIFICATE_KEY = "3c" * 32


def _pin(cert_pem: str) -> str:
    der = (
        x509.load_pem_x509_certificate(cert_pem.encode())
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return "sha256:" + hashlib.sha256(der).hexdigest()


@pytest.fixture(scope="module")
def double(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeApiServer, str]]:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    with serve(pki) as state:
        yield state, pki.ca_pem


@contextlib.contextmanager
def cluster(state: FakeApiServer, **changes: Any) -> Iterator[None]:
    """What the stack applied: the token's Secret, the sealed Secret, the Role and its binding."""
    state.bootstrap_tokens = {CP_TOKEN: [NODE_BOOTSTRAP_GROUP, CONTROL_PLANE_JOIN_GROUP]}
    state.secrets = {ENCRYPTION_CONFIG_SECRET: sealed_encryption_config_data(make_spec(), PKI, CERTIFICATE_KEY)}
    state.secret_readers = {ENCRYPTION_CONFIG_SECRET: [CONTROL_PLANE_JOIN_GROUP]}
    state.secret_requests = []
    for name, value in changes.items():
        setattr(state, name, value)
    yield


def joining_node(tmp_path: Path, state: FakeApiServer, ca_pem: str) -> Node:
    spec = make_spec(control_plane_endpoint="127.0.0.1", api_server_port=state.port)
    join = ControlPlaneJoin(token=CP_TOKEN, certificate_key=CERTIFICATE_KEY, ca_cert_pem=ca_pem)
    renderer = UserDataRenderer(spec, token=TOKEN, ca_cert_hash=_pin(ca_pem), control_plane_join=join)
    node = Node(tmp_path, renderer.render("cp-2"), "cp-2", without=("curl",))
    (Path(node.path) / "curl").symlink_to(shutil.which("curl") or "curl")
    node.with_containerd()
    node.set("api-up")  # for the stand-in kubeadm
    node.set("kubeadm-certs", CERTIFICATE_KEY)
    return node


def test_the_joining_node_reads_its_sealed_keys_with_its_token(
    tmp_path: Path, double: tuple[FakeApiServer, str]
) -> None:
    state, ca_pem = double
    with cluster(state):
        node = joining_node(tmp_path, state, ca_pem)
        assert node.boot().returncode == 0
    assert node.file(ENCRYPTION_CONFIG_PATH).read_text() == render_encryption_configuration(make_spec(), PKI)
    assert state.secret_requests == [("system:bootstrap:cpjoin", ENCRYPTION_CONFIG_SECRET, 200)]
    assert node.lines("joins") == ["joined"]


def test_a_token_without_the_control_plane_group_is_forbidden_and_the_node_does_not_join(
    tmp_path: Path, double: tuple[FakeApiServer, str]
) -> None:
    state, ca_pem = double
    with cluster(state, bootstrap_tokens={CP_TOKEN: [NODE_BOOTSTRAP_GROUP]}):
        node = joining_node(tmp_path, state, ca_pem)
        run = node.start(timeout=60)
    assert run.returncode != 0
    assert {code for _, _, code in state.secret_requests} == {403}
    assert not node.calls_of("kubeadm join")
    assert not node.file(ENCRYPTION_CONFIG_PATH).exists()


def test_an_expired_token_is_unknown_and_the_node_waits_for_the_next_up(
    tmp_path: Path, double: tuple[FakeApiServer, str]
) -> None:
    state, ca_pem = double
    with cluster(state, bootstrap_tokens={}, secrets={}):  # tokencleaner and the garbage collector ran
        node = joining_node(tmp_path, state, ca_pem)
        run = node.start(timeout=60)
    assert run.returncode != 0
    assert {code for _, _, code in state.secret_requests} == {401}
    assert not node.calls_of("kubeadm join")
