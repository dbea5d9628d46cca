"""ControlPlaneMember: the provider's delete (drain, then etcd), its diff, and its secrets in state.

The etcd side is a REAL etcd cluster (`etcd_real`); the API server is `kube_double`'s."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.k8s.etcd import member as etcd_member
from components.k8s.etcd.gateway import MEMBER_REMOVE
from components.k8s.etcd.member import ControlPlaneMember, ControlPlaneMemberArgs, ControlPlaneMemberProvider
from components.k8s.rollout.drain import DrainError
from stacks.tools.plan.mock_runtime import run_program
from tests.components.k8s.etcd.etcd_pki import EtcdPki, make_etcd_pki
from tests.components.k8s.etcd.etcd_real import RealEtcd, RecordingGateway, real_etcd, require_etcd
from tests.components.k8s.kube_double import KubeDouble, served


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> EtcdPki:
    require_etcd()
    return make_etcd_pki(Path(tmp_path_factory.mktemp("etcd-pki")))


@pytest.fixture
def etcd(pki: EtcdPki, tmp_path: Path) -> Iterator[RealEtcd]:
    with real_etcd(pki, tmp_path, ["cp-1", "cp-2", "cp-3"]) as cluster:
        yield cluster


@pytest.fixture
def etcd_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, dict[str, Any]]]:
    """Every call the provider's gateway makes: our own EtcdGateway, noting its calls."""
    calls: list[tuple[str, str, dict[str, Any]]] = []

    class Noting(RecordingGateway):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.calls = calls

    monkeypatch.setattr(etcd_member, "EtcdGateway", Noting)
    return calls


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    messages: dict[str, list[str]] = {"info": [], "warn": []}
    for level, found in messages.items():
        monkeypatch.setattr(pulumi.log, level, lambda message, *a, _found=found, **k: _found.append(message))
    return messages


def control_plane() -> KubeDouble:
    """Three control-plane nodes; cp-3 runs its static pods and calico (what the control-plane taint
    lets on; the drain's eviction rounds are tested in test_node_drain)."""
    kube = KubeDouble()
    for node in ("cp-1", "cp-2", "cp-3"):
        kube.add_node(node)
    kube.add_pod("kube-system", "etcd-cp-3", "cp-3")
    kube.pods["kube-system/etcd-cp-3"]["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    kube.add_pod("kube-system", "calico-node-c", "cp-3", owner="DaemonSet/calico-node")
    return kube


def props(pki: EtcdPki, etcd: RealEtcd, kubeconfig: str, node: str = "cp-3", **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "node_name": node,
        "node_address": etcd.addresses[node],
        "vm_id": f"vm-{node}",
        "other_addresses": [etcd.addresses[n] for n in etcd.initial if n != node],
        "client_port": etcd.port,
        "kubeconfig": kubeconfig,
        "etcd_ca_pem": pki.ca_pem,
        "etcd_client_cert_pem": pki.client_cert_pem,
        "etcd_client_key_pem": pki.client_key_pem,
        "timeout_seconds": 20,
    }
    values.update(overrides)
    return values


def test_delete_drains_the_node_then_removes_its_etcd_member(
    etcd: RealEtcd, pki: EtcdPki, etcd_calls: list[tuple[str, str, dict[str, Any]]], logged: dict[str, list[str]]
) -> None:
    kube = control_plane()
    ids = etcd.members()
    with served(kube) as kubeconfig:
        provider = ControlPlaneMemberProvider()
        created = provider.create(props(pki, etcd, kubeconfig))
        assert created.id == "cp-3" and kube.calls == [] and etcd_calls == []  # create only records
        provider.delete("cp-3", created.outs)
    assert "cp-3" not in kube.nodes
    assert [m for m, p in kube.calls if p == "/api/v1/nodes/cp-3"] == ["GET", "PATCH", "DELETE"]  # cordoned first
    assert set(etcd.members()) == {"cp-1", "cp-2"}
    assert [endpoint for endpoint, path, _ in etcd_calls if path == MEMBER_REMOVE] == [etcd.endpoint("cp-1")]
    assert logged["info"] == [
        f"control-plane node cp-3: drained; etcd member cp-3 ({ids['cp-3']:x}) removed via {etcd.endpoint('cp-1')}"
    ]


def test_a_drain_that_cannot_finish_leaves_etcd_alone(
    pki: EtcdPki, tmp_path: Path, etcd_calls: list[tuple[str, str, dict[str, Any]]]
) -> None:
    kube = control_plane()
    kube.add_pod("kube-system", "coredns-1", "cp-3", labels={"k8s-app": "kube-dns"}, owner="ReplicaSet/coredns")
    kube.add_pdb(
        "kube-system", "coredns", {"k8s-app": "kube-dns"}, min_available=1
    )  # its only replica: never a disruption
    # Unsettled: nothing here may reach etcd, so etcd's health window does not matter.
    with real_etcd(pki, tmp_path, ["cp-1", "cp-2", "cp-3"], settled=False) as etcd, served(kube) as kubeconfig:
        with pytest.raises(DrainError, match=r"kubernetes\.drainTimeoutMinutes"):
            ControlPlaneMemberProvider().delete("cp-3", props(pki, etcd, kubeconfig, timeout_seconds=0.05))
        assert etcd_calls == [] and set(etcd.members()) == {"cp-1", "cp-2", "cp-3"}


def test_a_single_control_plane_is_drained_and_its_last_member_left(
    pki: EtcdPki, tmp_path: Path, etcd_calls: list[tuple[str, str, dict[str, Any]]], logged: dict[str, list[str]]
) -> None:
    kube = KubeDouble()
    kube.add_node("cp-1")
    with real_etcd(pki, tmp_path, ["cp-1"], settled=False) as etcd, served(kube) as kubeconfig:
        ControlPlaneMemberProvider().delete("cp-1", props(pki, etcd, kubeconfig, "cp-1", other_addresses=[]))
        assert etcd_calls == [] and set(etcd.members()) == {"cp-1"}
    assert "cp-1" not in kube.nodes
    (warning,) = logged["warn"]
    assert "last etcd member" in warning and "kubeadm init" in warning


def test_a_new_vm_or_name_replaces_the_guard_delete_first_and_the_rest_updates_in_place() -> None:
    provider = ControlPlaneMemberProvider()
    olds = {
        "node_name": "cp-3",
        "node_address": "10.0.0.13",
        "vm_id": "vm-1",
        "other_addresses": ["10.0.0.11", "10.0.0.12"],
        "client_port": 2379,
        "kubeconfig": "k",
        "etcd_ca_pem": "ca",
        "etcd_client_cert_pem": "c",
        "etcd_client_key_pem": "key",
        "timeout_seconds": 900,
    }
    for key, value in (("vm_id", "vm-2"), ("node_name", "cp-9")):
        replaced = provider.diff("cp-3", olds, {**olds, key: value})
        assert replaced.replaces == [key] and replaced.delete_before_replace
    for key, value in (("other_addresses", ["10.0.0.11"]), ("etcd_client_key_pem", "key2"), ("timeout_seconds", 60)):
        updated = provider.diff("cp-3", olds, {**olds, key: value})
        assert updated.changes and not updated.replaces, key
    assert not provider.diff("cp-3", olds, dict(olds)).changes


def test_args_refuse_the_nodes_own_address_among_the_others() -> None:
    with pytest.raises(ValueError, match=r"must not hold the node.s own address 10\.0\.0\.13"):
        ControlPlaneMemberArgs(
            node_name="cp-3",
            node_address="10.0.0.13",
            vm_id="vm",
            other_addresses=["10.0.0.13"],
            kubeconfig="k",
            etcd_ca_pem="ca",
            etcd_client_cert_pem="c",
            etcd_client_key_pem="key",
        )


def test_credentials_reach_the_state_only_as_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_ERROR_OUTPUT_STRING", "true")

    def program() -> None:
        ControlPlaneMember(
            "member-cp-3",
            ControlPlaneMemberArgs(
                node_name="cp-3",
                node_address="10.0.0.13",
                vm_id="vm-3",
                other_addresses=["10.0.0.11", "10.0.0.12"],
                kubeconfig="apiVersion: v1",
                etcd_ca_pem="-----BEGIN CERTIFICATE-----",
                etcd_client_cert_pem="-----BEGIN CERTIFICATE----- client",
                etcd_client_key_pem="-----BEGIN RSA PRIVATE KEY-----",
            ),
        )

    run = run_program(program, project="vsphere-gpu-cluster", stack="test", config={}, secret_keys=[])
    (member,) = run.by_type("gpucluster:kubernetes:ControlPlaneMember")
    inputs = member.redacted_inputs()
    for key in ("kubeconfig", "etcd_client_cert_pem", "etcd_client_key_pem"):
        assert inputs[key] == "[secret]", key
    assert inputs["other_addresses"] == ["10.0.0.11", "10.0.0.12"] and inputs["timeout_seconds"] == 900
