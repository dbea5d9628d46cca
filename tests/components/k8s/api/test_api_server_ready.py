"""ApiServerReady against a local HTTPS double of kube-apiserver (`apiserver_double.py`)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from components.k8s.api.probe import ACCESS_REVIEW_PATH, KUBEADM_DONE_PATH
from components.k8s.api.ready import (
    ApiServerCredentialsRefusedError,
    ApiServerNotReadyError,
    ApiServerReadyArgs,
    ApiServerReadyProvider,
    ClientCredentials,
    probe_admin_access,
    probe_readyz,
    wait_until_ready,
)
from tests.components.k8s.node_bootstrap.apiserver_double import (
    ADMIN_GROUP,
    LOOPBACK,
    FakeApiServer,
    Pki,
    identity,
    make_pki,
    serve,
)

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="the openssl CLI makes the throwaway certificates"
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def server(pki: Pki) -> Iterator[FakeApiServer]:
    with serve(pki) as state:
        yield state


def props(port: int, pki: Pki, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "host": LOOPBACK,
        "port": port,
        "ca_certificate_pem": pki.ca_pem,
        "client_certificate_pem": pki.admin.certificate_pem,
        "client_key_pem": pki.admin.key_pem,
        "timeout_seconds": 5,
        "poll_interval_seconds": 0.05,
    }
    values.update(overrides)
    return values


def test_create_succeeds_once_readyz_answers_and_the_admin_is_authorised(server: FakeApiServer, pki: Pki) -> None:
    result = ApiServerReadyProvider().create(props(server.port, pki))
    assert result.id == f"{LOOPBACK}:{server.port}"
    assert result.outs is not None
    assert result.outs["url"] == f"https://{LOOPBACK}:{server.port}/readyz"
    assert server.paths == ["/readyz", ACCESS_REVIEW_PATH, KUBEADM_DONE_PATH]
    assert "Authorization" not in server.headers[0]
    assert server.peers[0] == {}  # /readyz is probed anonymously: no client certificate
    assert identity(server.peers[1]) == ("kubernetes-admin", [ADMIN_GROUP, "system:authenticated"])
    assert server.review_bodies[0]["kind"] == "SelfSubjectAccessReview"
    assert server.review_bodies[0]["spec"] == {"resourceAttributes": {"verb": "*", "group": "*", "resource": "*"}}


def test_ready_waits_until_kubeadm_binds_the_admin_group(server: FakeApiServer, pki: Pki) -> None:
    """Defect 13.6: /readyz says 200 while kubeadm has not yet created the kubeadm:cluster-admins
    binding; ready must wait for it (the old probe declared ready at the first 200)."""
    server.bind_after_reviews = 3
    ApiServerReadyProvider().create(props(server.port, pki))
    assert server.reviews == 4  # three refusals, then allowed
    assert server.admin_group_bound()


def test_credentials_never_authorised_is_a_refusal_not_a_timeout(server: FakeApiServer, pki: Pki) -> None:
    server.bind_after_reviews = None
    with pytest.raises(ApiServerCredentialsRefusedError) as info:
        wait_until_ready(
            LOOPBACK, server.port, pki.ca_pem, credentials=pki.admin, timeout_seconds=0.6, poll_interval_seconds=0.1
        )
    message = str(info.value)
    assert f"API server at https://{LOOPBACK}:{server.port} answered /readyz but refused" in message
    assert "SelfSubjectAccessReview for '*' not allowed" in message
    assert "clusterrolebinding kubeadm:cluster-admins" in message
    assert server.reviews >= 2


def test_a_forbidden_status_is_a_refusal_with_the_servers_message(server: FakeApiServer, pki: Pki) -> None:
    server.rbac_bootstrapped = False
    result = probe_admin_access(LOOPBACK, server.port, pki.ca_pem, pki.admin)
    assert not result.ready and result.stage == "refused"
    assert result.detail.startswith("HTTP 403: selfsubjectaccessreviews.authorization.k8s.io is forbidden")
    assert 'User "kubernetes-admin"' in result.detail


def test_a_certificate_from_another_ca_is_never_authorised(server: FakeApiServer, pki: Pki) -> None:
    result = probe_admin_access(LOOPBACK, server.port, pki.ca_pem, pki.outsider, timeout=2)
    assert not result.ready
    assert server.reviews == 0


def test_create_waits_through_not_ready_answers(server: FakeApiServer, pki: Pki) -> None:
    server.statuses = [500, 403, 200]
    ApiServerReadyProvider().create(props(server.port, pki))
    assert server.requests == 3
    assert server.reviews == 1  # the access review only once /readyz said 200


def test_never_answered_names_the_endpoint_the_limit_and_where_to_look(server: FakeApiServer, pki: Pki) -> None:
    server.statuses = [500]
    with pytest.raises(ApiServerNotReadyError) as info:
        wait_until_ready(
            LOOPBACK, server.port, pki.ca_pem, credentials=pki.admin, timeout_seconds=0.6, poll_interval_seconds=0.1
        )
    assert not isinstance(info.value, ApiServerCredentialsRefusedError)
    message = str(info.value)
    assert f"API server at https://{LOOPBACK}:{server.port} did not become ready within" in message
    assert "0.01 minutes" in message
    assert "HTTP 500 [-]etcd failed" in message
    assert "check the control-plane VM console and `journalctl -u gpucluster-bootstrap`" in message
    assert server.requests >= 2
    assert server.reviews == 0


def test_a_server_the_ca_does_not_vouch_for_is_never_ready(server: FakeApiServer, pki: Pki) -> None:
    result = probe_readyz(LOOPBACK, server.port, pki.other_ca_pem)
    assert not result.ready
    assert "TLS verification against the cluster CA failed" in result.detail


def test_nothing_listening_is_reported_not_raised(pki: Pki, server: FakeApiServer) -> None:
    # A port we just saw in use and then closed is the most reliable "nothing there" on loopback.
    import socket

    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        closed_port = sock.getsockname()[1]
    result = probe_readyz(LOOPBACK, closed_port, pki.ca_pem, timeout=2)
    assert not result.ready
    assert result.stage == "unreachable"
    assert "ConnectionRefusedError" in result.detail


def test_timeout_arithmetic_with_a_fake_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    from components.k8s.api import ready as api_ready

    now = [0.0]
    sleeps: list[float] = []

    def fake_probe(*_args: Any, **_kwargs: Any) -> api_ready.ProbeResult:
        return api_ready.ProbeResult(False, "ConnectionRefusedError: refused")

    def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(api_ready, "probe_api_server", fake_probe)
    with pytest.raises(ApiServerNotReadyError, match="within 20 minutes"):
        wait_until_ready(
            "10.0.0.10",
            6443,
            "unused",
            credentials=ClientCredentials(certificate_pem="c", key_pem="k"),
            clock=lambda: now[0],
            sleep=fake_sleep,
        )
    assert sum(sleeps) == pytest.approx(1200)
    assert max(sleeps) == 10


def test_bad_ca_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="ca_certificate_pem is not a usable PEM certificate"):
        probe_readyz(LOOPBACK, 1, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")


def test_bad_client_credentials_are_a_clear_error_without_the_key(pki: Pki) -> None:
    broken = ClientCredentials(certificate_pem=pki.admin.certificate_pem, key_pem="not a key SECRET-MATERIAL")
    with pytest.raises(ValueError, match="admin client certificate or key is not usable") as info:
        probe_admin_access(LOOPBACK, 1, pki.ca_pem, broken)
    assert "SECRET-MATERIAL" not in str(info.value)
    assert "SECRET-MATERIAL" not in repr(broken)


# ------------------------------------------------------------------------------------------
# diff / update / read / delete: honest bookkeeping, no network
# ------------------------------------------------------------------------------------------

OLD = {
    "host": "10.0.0.10",
    "port": 6443.0,
    "ca_certificate_pem": "CA-1",
    "client_certificate_pem": "CERT-1",
    "client_key_pem": "KEY-1",
    "timeout_seconds": 1200.0,
    "poll_interval_seconds": 10.0,
    "url": "https://10.0.0.10:6443/readyz",
}


@pytest.mark.parametrize(
    ("change", "changes", "replaces"),
    [
        ({}, False, []),
        ({"port": 6443}, False, []),  # int vs float from the engine is no change
        ({"host": "10.0.0.11"}, True, ["host"]),
        ({"port": 443}, True, ["port"]),
        ({"ca_certificate_pem": "CA-2"}, True, ["ca_certificate_pem"]),
        # The yearly admin certificate renewal: check the new one is authorised too.
        ({"client_certificate_pem": "CERT-2"}, True, ["client_certificate_pem"]),
        ({"client_key_pem": "KEY-2"}, True, ["client_key_pem"]),
        ({"timeout_seconds": 600}, True, []),
        ({"poll_interval_seconds": 5}, True, []),
    ],
)
def test_diff(change: dict[str, Any], changes: bool, replaces: list[str]) -> None:
    news = {k: v for k, v in {**OLD, **change}.items() if k != "url"}
    diff = ApiServerReadyProvider().diff("10.0.0.10:6443", OLD, news)
    assert diff.changes is changes
    assert diff.replaces == replaces


def test_update_does_not_probe_and_read_reports_the_endpoint() -> None:
    provider = ApiServerReadyProvider()
    news = {**OLD, "timeout_seconds": 60}
    update = provider.update("10.0.0.10:6443", OLD, news)
    assert update.outs is not None and update.outs["timeout_seconds"] == 60
    read = provider.read("10.0.0.10:6443", OLD)
    assert read.id == "10.0.0.10:6443"
    assert read.outs is not None and read.outs["url"] == "https://10.0.0.10:6443/readyz"
    assert provider.delete("10.0.0.10:6443", OLD) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout_seconds": 0}, "timeout_seconds must be positive"),
        ({"poll_interval_seconds": 0}, "poll_interval_seconds"),
        ({"port": 0}, "not a TCP port"),
    ],
)
def test_args_are_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ApiServerReadyArgs(
            host="10.0.0.10", ca_certificate_pem="x", client_certificate_pem="c", client_key_pem="k", **kwargs
        )


def test_ready_waits_for_kubeadm_init_to_finish(server: FakeApiServer, pki: Pki) -> None:
    """kubeadm writes the join token's Secret in its bootstrap-token phase, after the admin binding:
    applying the stack's copy before then races kubeadm (it would overwrite the expiry)."""
    server.init_done_after_reviews = 3
    ApiServerReadyProvider().create(props(server.port, pki))
    assert server.reviews >= 3
    assert server.paths[-1] == KUBEADM_DONE_PATH


def test_a_kubeadm_init_that_never_finishes_is_reported_as_such(server: FakeApiServer, pki: Pki) -> None:
    server.init_done_after_reviews = None
    with pytest.raises(ApiServerNotReadyError, match="kubeadm init has not finished"):
        ApiServerReadyProvider().create(props(server.port, pki, timeout_seconds=1))
