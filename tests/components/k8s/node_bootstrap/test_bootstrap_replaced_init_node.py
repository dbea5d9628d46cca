"""The first control-plane node replaced on day two (same name, addresses and role, a new VM):
it must join the running cluster, never `kubeadm init` a second one beside it.

Executed like test_bootstrap_script_runs.py (real bash, recording stand-ins). The other
control-plane nodes are the stand-in curl's peers: `peer-<host:port>` under the node's $SIM says
whether an API server answers there (standins/standin.sh, curl_peer).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from components.k8s.node_bootstrap import ClusterNode, ClusterSpec, UserDataRenderer
from components.k8s.node_bootstrap.env_file import bootstrap_env
from components.k8s.node_bootstrap.kubeadm import kubeadm_join_document
from components.k8s.node_bootstrap.paths import KUBEADM_CONFIG_PATH, KUBEADM_JOIN_CONFIG_PATH
from components.k8s.node_bootstrap.spec import find_node
from tests.components.k8s.node_bootstrap.cluster_settings import CONTROL_PLANE_JOIN, HANDOFF_SIGNER_PEM
from tests.components.k8s.node_bootstrap.node_harness import Node
from tests.components.k8s.node_bootstrap.test_bootstrap_script_runs import (
    CA_HASH,
    PKI,
    TOKEN,
    assert_bootstrapped,
    assert_never_harmed,
    make_spec,
)

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the bootstrap script needs bash")

CP2, CP3 = "10.0.0.12:6443", "10.0.0.13:6443"
THREE_CONTROL_PLANES = [
    ClusterNode(name="cp-1", management_ip="10.0.0.11"),
    ClusterNode(name="cp-2", management_ip="10.0.0.12"),
    ClusterNode(name="cp-3", management_ip="10.0.0.13"),
]
JOIN = "kubeadm join --config "


def three_cp_spec(**overrides: object) -> ClusterSpec:
    return make_spec(control_plane_nodes=THREE_CONTROL_PLANES, **overrides)


def first_node(tmp_path: Path, *, spec: ClusterSpec | None = None) -> Node:
    renderer = UserDataRenderer(
        spec or three_cp_spec(),
        token=TOKEN,
        ca_cert_hash=CA_HASH,
        control_plane_join=CONTROL_PLANE_JOIN,
        pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    )
    node = Node(tmp_path, renderer.render("cp-1"), "cp-1")
    node.stack_delivers_pki(spec or three_cp_spec(), PKI)
    node.with_containerd()
    return node


def running_cluster(node: Node, *, cp2: str = "ready", cp3: str = "ready") -> None:
    """The cluster runs without its first node: cp-2 and cp-3 serve, the endpoint answers, and
    etcd has their two members (the old cp-1's was removed before its VM was deleted)."""
    node.set("api-up")
    node.set(f"peer-{CP2}", cp2)
    node.set(f"peer-{CP3}", cp3)
    node.set("etcd-members", "cp-2\ncp-3")


def probes(node: Node, calls: list[str] | None = None) -> list[str]:
    """The curl calls to another control-plane node (not the node's own endpoint)."""
    # Not the fetch of Calico's pinned manifest, which is no probe of a peer.
    return [
        c
        for c in (node.calls if calls is None else calls)
        if c.startswith("curl") and "10.0.0.10:" not in c and not c.endswith("tigera-operator.yaml")
    ]


def assert_joined_not_initialised(node: Node) -> None:
    assert_bootstrapped(node)
    assert not node.calls_of("kubeadm init"), "a replaced first node ran kubeadm init: a second cluster"
    assert node.lines("inits") == []
    # Joined once (a join cut after the kubelet registered is completed by its phases instead).
    assert len(node.lines("joins")) <= 1
    assert node.file("/etc/kubernetes/kubelet.conf").exists()
    assert node.lines("etcd-members") == ["cp-2", "cp-3", "cp-1"]
    assert node.file("/etc/kubernetes/pki/ca.key").read_text() == PKI.ca_key_pem
    # A kubeadm reset is allowed only as for any control-plane join: of a join that failed before
    # the kubelet registered (assert_never_harmed: never on a joined node, never over etcd data).
    assert not node.file(KUBEADM_JOIN_CONFIG_PATH).exists(), "the join token stays on disk"


# --- what the init node receives ----------------------------------------------------------------


def test_the_init_node_gets_the_other_control_plane_addresses_and_a_control_plane_join() -> None:
    spec = three_cp_spec()
    document = yaml.safe_load(
        UserDataRenderer(
            spec,
            token=TOKEN,
            ca_cert_hash=CA_HASH,
            control_plane_join=CONTROL_PLANE_JOIN,
            pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
        ).render("cp-1")
    )
    files = {entry["path"]: entry for entry in document["write_files"]}
    assert bootstrap_env(spec, "init", find_node(spec, "cp-1"))["GPUCLUSTER_CONTROL_PLANE_PEERS"] == f"{CP2},{CP3}"
    join = files[KUBEADM_JOIN_CONFIG_PATH]
    assert join["permissions"] == "0600"  # the token
    (loaded,) = yaml.safe_load_all(join["content"])
    # The same control-plane join as cp-2's, for cp-1: shared PKI on disk (no certificateKey), the
    # stack's token, the CA pin, its own advertise address.
    assert loaded == kubeadm_join_document(
        spec, find_node(spec, "cp-1"), token=TOKEN, ca_cert_hash=CA_HASH, control_plane=True
    )
    assert loaded["controlPlane"] == {"localAPIEndpoint": {"advertiseAddress": "10.0.0.11", "bindPort": 6443}}
    assert loaded["discovery"]["bootstrapToken"] == {
        "apiServerEndpoint": "10.0.0.10:6443",
        "token": TOKEN,
        "caCertHashes": [CA_HASH],
    }
    cp2 = yaml.safe_load(
        UserDataRenderer(
            spec,
            token=TOKEN,
            ca_cert_hash=CA_HASH,
            control_plane_join=CONTROL_PLANE_JOIN,
            pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
        ).render("cp-2")
    )
    cp2_files = {entry["path"]: entry for entry in cp2["write_files"]}
    (cp2_join,) = yaml.safe_load_all(cp2_files[KUBEADM_CONFIG_PATH]["content"])
    # cp-2 downloads the PKI instead (certificateKey, issue 40 item 5); otherwise the same join.
    assert sorted(cp2_join) == sorted(loaded)
    assert sorted(cp2_join["controlPlane"]) == sorted([*loaded["controlPlane"], "certificateKey"])
    assert KUBEADM_JOIN_CONFIG_PATH not in cp2_files
    assert "GPUCLUSTER_CONTROL_PLANE_PEERS" not in bootstrap_env(spec, "control-plane", find_node(spec, "cp-2"))


def test_peers_are_the_other_control_plane_nodes_ipv6_in_brackets_none_with_one_control_plane() -> None:
    single = make_spec(control_plane_endpoint="10.0.0.11", control_plane_nodes=[THREE_CONTROL_PLANES[0]])
    assert bootstrap_env(single, "init", find_node(single, "cp-1"))["GPUCLUSTER_CONTROL_PLANE_PEERS"] == ""
    v6 = make_spec(
        control_plane_endpoint="fd00::10",
        control_plane_nodes=[
            ClusterNode(name="cp-1", management_ip="fd00::11"),
            ClusterNode(name="cp-2", management_ip="fd00::12"),
        ],
        worker_nodes=[],
        api_server_port=8443,
    )
    assert bootstrap_env(v6, "init", find_node(v6, "cp-1"))["GPUCLUSTER_CONTROL_PLANE_PEERS"] == "[fd00::12]:8443"


# --- the script ----------------------------------------------------------------------------------


def test_day_one_nobody_answers_so_the_first_node_inits_after_probing_with_short_timeouts(tmp_path: Path) -> None:
    node = first_node(tmp_path)
    assert node.boot().returncode == 0
    assert_bootstrapped(node)
    assert node.lines("inits") == ["init"]
    assert not node.lines("joins")
    assert node.lines("applied")[-1].endswith("calico-installation.yaml")
    asked = probes(node)
    assert {c.rsplit(" ", 1)[1] for c in asked} == {f"https://{CP2}/readyz", f"https://{CP3}/readyz"}
    assert len(asked) == 6, "three rounds over both peers"
    for call in asked:
        assert "--connect-timeout 3" in call and "--max-time 5" in call, call
    calls = node.calls
    assert calls.index(asked[-1]) < calls.index(node.calls_of("kubeadm init --config")[0])
    assert not node.file("/var/lib/gpucluster/joins-running-cluster").exists()


def test_a_replaced_first_node_joins_the_running_cluster_instead_of_starting_a_new_one(tmp_path: Path) -> None:
    node = first_node(tmp_path)
    running_cluster(node)
    run = node.boot()
    assert run.returncode == 0, run.output
    assert_joined_not_initialised(node)
    assert not node.calls_of("kubeadm reset")
    assert node.lines("joins") == ["joined"]
    assert node.calls_of(JOIN) == [JOIN + str(node.file(KUBEADM_JOIN_CONFIG_PATH))]
    # Calico and kubeadm's addons are cluster state, already there: nothing is applied again.
    assert not node.calls_of("kubectl")
    assert len(probes(node)) == 1, "the first answer decides"
    assert "the cluster already runs" in run.output


@pytest.mark.parametrize(
    ("cp2", "cp3"),
    [("unready", "unready"), ("unauthorized", ""), ("", "ready"), ("hangs", "ready")],
    ids=["readyz-500", "anonymous-refused-401", "only-cp-3", "cp-2-hangs"],
)
def test_any_api_server_answer_means_the_cluster_runs(tmp_path: Path, cp2: str, cp3: str) -> None:
    node = first_node(tmp_path)
    running_cluster(node, cp2=cp2, cp3=cp3)
    assert node.boot().returncode == 0, node.runs[-1].output
    assert_joined_not_initialised(node)


def test_a_hanging_peer_is_given_up_and_day_one_still_inits(tmp_path: Path) -> None:
    """A peer that drops packets: without curl timeouts the stand-in hangs as the real one would,
    and the boot (60 s in the harness) fails."""
    node = first_node(tmp_path)
    node.set(f"peer-{CP2}", "hangs")
    node.set(f"peer-{CP3}", "hangs")
    assert node.boot().returncode == 0, node.runs[-1].output
    assert node.lines("inits") == ["init"]
    assert not node.lines("failures"), node.lines("failures")


def test_a_single_control_plane_always_inits_and_probes_nothing(tmp_path: Path) -> None:
    spec = make_spec(control_plane_endpoint="10.0.0.11", control_plane_nodes=[THREE_CONTROL_PLANES[0]])
    node = first_node(tmp_path, spec=spec)
    assert node.boot().returncode == 0
    assert_bootstrapped(node)
    assert node.lines("inits") == ["init"]
    assert not probes(node)  # its endpoint is its own address: nobody else to ask


# --- re-runs: the choice is made once, on the node's own evidence ---------------------------------

EFFECTFUL = ("kubeadm", "kubectl", "systemctl restart", "curl")


def test_a_replaced_first_node_cut_at_any_step_never_inits(tmp_path: Path) -> None:
    reference = first_node(tmp_path / "reference")
    running_cluster(reference)
    assert reference.boot().returncode == 0
    cut_points = [n for n, call in enumerate(reference.calls, start=1) if call.startswith(EFFECTFUL)]
    assert any(reference.calls[n - 1].startswith("kubeadm join") for n in cut_points)
    for number in cut_points:
        for mode in ("before", "after"):
            node = first_node(tmp_path / f"cut-{number}-{mode}")
            running_cluster(node)
            node.cut_power_at(number, mode)
            assert node.boot().power_cut, f"no power cut at call {number} ({mode})"
            node.restore_power()
            assert node.boot().returncode == 0, f"cut {mode} {node.lines('cut-call')}: {node.runs[-1].output}"
            assert_joined_not_initialised(node)


@pytest.mark.parametrize("phase", ["control-plane-prepare", "tls-bootstrap", "control-plane-join"])
def test_a_join_cut_inside_kubeadm_joins_on_the_next_boot_without_asking_again(tmp_path: Path, phase: str) -> None:
    """After the cut the others do not answer this node (say a firewall change on 6443): it chose
    to join before kubeadm join ran, and keeps that choice; admin.conf written by the join is no
    sign of an init."""
    node = first_node(tmp_path)
    running_cluster(node)
    node.set("cut-in", phase)
    assert node.boot().power_cut
    before = len(node.calls)
    node.set(f"peer-{CP2}", "")  # connection refused from now on
    node.set(f"peer-{CP3}", "")
    assert node.boot().returncode == 0, node.runs[-1].output
    assert not probes(node, node.calls[before:])
    assert_joined_not_initialised(node)


def test_a_joined_first_node_run_again_does_nothing(tmp_path: Path) -> None:
    node = first_node(tmp_path)
    running_cluster(node)
    assert node.boot().returncode == 0
    before = len(node.calls)
    assert node.start().returncode == 0
    assert not [c for c in node.calls[before:] if c.startswith(("kubeadm", "kubectl", "curl"))]


def test_a_day_one_init_cut_after_kubeadm_init_completes_as_init_even_once_the_others_joined(tmp_path: Path) -> None:
    """Day one: init ran, the power went before Calico, and meanwhile cp-2 and cp-3 joined this
    node's cluster. The next boot must finish the init path, not take their answer as a reason to
    join."""
    reference = first_node(tmp_path / "reference")
    assert reference.boot().returncode == 0
    number = reference.calls.index(reference.calls_of("kubeadm init --config")[0]) + 1
    node = first_node(tmp_path / "node")
    node.cut_power_at(number, "after")
    assert node.boot().power_cut
    node.restore_power()
    before = len(node.calls)
    node.set(f"peer-{CP2}", "ready")
    node.set(f"peer-{CP3}", "ready")
    assert node.boot().returncode == 0, node.runs[-1].output
    assert_never_harmed(node)
    assert node.lines("inits") == ["init"]
    assert not node.lines("joins")
    assert not probes(node, node.calls[before:])
    assert node.lines("applied")[-1].endswith("calico-installation.yaml")
