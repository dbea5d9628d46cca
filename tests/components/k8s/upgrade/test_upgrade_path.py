"""The upgrade path from a kubeadm-built 1.33 cluster to 1.37, one minor per `pulumi up`, with the
etcd gates at each change of etcd line (3.5 -> 3.6 at 3.5.32+, 3.6 -> 3.7 at 3.6.11+).

The cluster side runs for real: `ClusterUpgradeProvider` (the `cluster-version` step's create,
diff and update, as the engine calls them) over HTTP against the API double holding kubeadm's
stored ClusterConfiguration (tests.components.k8s.upgrade.test_cluster_upgrade), and the real gate
code reading each member's `StatusResponse.version` through the etcd gateway's JSON.

What stands in for the VMs is `JoinedMembers`: a control-plane replacement (the rollout after this
step) whose new member runs the etcd its `kubeadm join` chooses, which is kubeadm's rule: the
stored ClusterConfiguration's `etcd.local.imageTag` when set, else kubeadm's pin for the stored
minor (kubernetes/kubernetes cmd/kubeadm/app/images/images.go `GetEtcdImage`;
constants.go `SupportedEtcdVersion`). No real etcd 3.5.32, 3.6 or 3.7 can be installed here (the
packaged one is 3.4.23: test_etcd_upgrade_guard's module docstring), so the member versions are the
tags' versions; docs/tests.md lists the double. That the control plane does roll when the tag
changes is the nodes' generation (stacks.wiring.rollout.control_plane_parts), checked here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.k8s.etcd.gateway import MEMBER_LIST, MEMBER_STATUS, GatewayResponse
from components.k8s.kubeadm_pins import kubeadm_pins
from components.k8s.node_bootstrap.kubeadm import kubeadm_init_documents
from components.k8s.node_bootstrap.spec import ClusterSpec
from components.k8s.upgrade.steps import UpgradeError
from components.k8s.upgrade.upgrade import ClusterUpgradeProvider
from components.k8s.upgrade.versions import Version
from components.k8s.version_policy import etcd_image_tag
from stacks.environment.loader import load_environment
from stacks.environment.model import Environment
from stacks.environment.stack_file import read_stack_file
from stacks.wiring.rollout import control_plane_parts
from tests.components.k8s.kube_double import KubeDouble, served
from tests.components.k8s.node_bootstrap.cluster_settings import cluster_settings
from tests.components.k8s.upgrade.test_cluster_upgrade import cluster, stored
from tests.stack_fixtures import fixture_stack

REPO = Path(__file__).resolve().parents[4]
MEMBERS = ("cp-1", "cp-2", "cp-3")
ETCD_ACCESS = {
    "etcd_addresses": ["10.0.0.11", "10.0.0.12", "10.0.0.13"],
    "etcd_client_port": 2379,
    "etcd_ca_pem": "ca",
    "etcd_client_cert_pem": "cert",
    "etcd_client_key_pem": "key",
}


class JoinedMembers:
    """Three etcd members whose versions are what kubeadm ran them with; answers the gateway's JSON."""

    def __init__(self, tag: str) -> None:
        self.versions = dict.fromkeys(MEMBERS, tag.split("-")[0])

    def replace_control_plane(self, kube: KubeDouble) -> None:
        """The rollout: each control-plane node replaced in turn, its new member running the etcd
        the stored ClusterConfiguration names (module docstring)."""
        document = stored(kube)
        tag = ((document.get("etcd") or {}).get("local") or {}).get("imageTag")
        if not tag:
            tag = kubeadm_pins(Version.parse(str(document["kubernetesVersion"])).minor).etcd
        for name in MEMBERS:
            self.versions[name] = str(tag).split("-")[0]

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


def pulumi_up(kube: KubeDouble, members: JoinedMembers, olds: dict[str, Any] | None, version: str) -> dict[str, Any]:
    """The `cluster-version` step as the engine runs it for a stack at `version` (create when the
    state has none, else diff and update); then, as the rollout does, the control plane replaced."""
    provider = ClusterUpgradeProvider(gateway_for=lambda _props: members)
    with served(kube) as kubeconfig:
        news = {"step": "cluster-configuration", "version": version, "kubeconfig": kubeconfig, **ETCD_ACCESS,
                "etcd_image_tag": etcd_image_tag(version)}  # fmt: skip
        if olds is None:
            outs = provider.create(news).outs
        else:
            olds = {**olds, "kubeconfig": kubeconfig}
            if provider.diff("cluster-version", olds, news).changes:
                outs = provider.update("cluster-version", olds, news).outs
            else:
                outs = olds
    members.replace_control_plane(kube)
    return {k: v for k, v in outs.items() if k != "kubeconfig"}


def kubeadm_built(version: str) -> tuple[KubeDouble, JoinedMembers]:
    """A cluster `kubeadm init` built at `version` (no imageTag stored), its members at kubeadm's pin."""
    kube = cluster(f"v{version}")
    assert "imageTag" not in (stored(kube).get("etcd") or {}).get("local", {})
    return kube, JoinedMembers(kubeadm_pins(Version.parse(version).minor).etcd)


def test_a_kubeadm_built_1_33_cluster_reaches_1_37_by_pulumi_up_alone() -> None:
    kube, members = kubeadm_built("1.33.6")
    assert set(members.versions.values()) == {"3.5.24"}  # below 3.5.32: the 3.6 gate refuses it
    # The state a stack deployed by the previous program holds: no etcd tag.
    state: dict[str, Any] = {"step": "cluster-configuration", "version": "1.33.6", "applied": True, **ETCD_ACCESS}
    # 1) the new program, the same version: the tag of 1.33 (3.5.32-0) stored, the members rolled onto it.
    state = pulumi_up(kube, members, state, "1.33.6")
    assert stored(kube)["kubernetesVersion"] == "v1.33.6"
    assert stored(kube)["etcd"]["local"] == {"dataDir": "/var/lib/etcd", "imageTag": "3.5.32-0"}
    assert set(members.versions.values()) == {"3.5.32"}
    walked = []
    for version in ("1.34.2", "1.35.0", "1.36.1", "1.37.1"):
        state = pulumi_up(kube, members, state, version)
        walked.append((stored(kube)["kubernetesVersion"], stored(kube)["etcd"]["local"]["imageTag"],
                       members.versions["cp-1"]))  # fmt: skip
    assert walked == [
        ("v1.34.2", "3.6.13-0", "3.6.13"),  # the 3.6 gate passed: every member at 3.5.32
        ("v1.35.0", "3.6.13-0", "3.6.13"),
        ("v1.36.1", "3.6.13-0", "3.6.13"),
        ("v1.37.1", "3.7.0-0", "3.7.0"),  # the 3.7 gate passed: every member at 3.6.13 (>= 3.6.11)
    ]


def test_kubeadms_own_etcd_at_1_33_is_refused_at_the_step_onto_3_6() -> None:
    """What the old program did (no tag kept, the stack straight to 1.34): refused, nothing written."""
    kube, members = kubeadm_built("1.33.6")
    state = {"step": "cluster-configuration", "version": "1.33.6", "applied": True, **ETCD_ACCESS,
             "etcd_image_tag": "3.5.32-0"}  # fmt: skip  # as if the tag had been written, the nodes not rolled
    with pytest.raises(UpgradeError) as refused:
        pulumi_up(kube, members, state, "1.34.2")
    message = str(refused.value)
    assert "etcd 3.6 may only join members at 3.5.32 or later" in message
    assert "cp-1 (" in message and "runs 3.5.24" in message and "nothing was changed" in message
    assert "upgrade_3_6" in message
    assert stored(kube)["kubernetesVersion"] == "v1.33.6" and "imageTag" not in stored(kube)["etcd"]["local"]


def test_kubeadms_own_etcd_at_1_36_is_refused_at_the_step_onto_3_7() -> None:
    """A cluster kubeadm built at 1.36 runs 3.6.10 (kubernetes/kubernetes#138392; below 3.6.11): 1.37
    is refused until the stack's tag has rolled the control plane at 1.36; then it passes."""
    kube, members = kubeadm_built("1.36.1")
    with pytest.raises(UpgradeError, match=r"etcd 3\.7 may only join members at 3\.6\.11 or later"):
        pulumi_up(kube, members, {"step": "cluster-configuration", "version": "1.36.1", "applied": True,
                                  **ETCD_ACCESS, "etcd_image_tag": "3.6.13-0"}, "1.37.1")  # fmt: skip
    assert stored(kube)["kubernetesVersion"] == "v1.36.1"
    assert set(members.versions.values()) == {"3.6.10"}
    state = pulumi_up(kube, members, {"step": "cluster-configuration", "version": "1.36.1", "applied": True,
                                      **ETCD_ACCESS}, "1.36.1")  # fmt: skip
    assert set(members.versions.values()) == {"3.6.13"}
    pulumi_up(kube, members, state, "1.37.1")
    assert stored(kube)["kubernetesVersion"] == "v1.37.1" and stored(kube)["etcd"]["local"]["imageTag"] == "3.7.0-0"


def test_a_member_left_behind_refuses_the_next_line() -> None:
    kube, members = kubeadm_built("1.33.6")
    state = pulumi_up(kube, members, {"step": "cluster-configuration", "version": "1.33.6", "applied": True,
                                      **ETCD_ACCESS}, "1.33.6")  # fmt: skip
    members.versions["cp-2"] = "3.5.31"  # e.g. its replacement failed and the old member stayed
    with pytest.raises(UpgradeError, match=r"cp-2 \(.*runs 3\.5\.31"):
        pulumi_up(kube, members, state, "1.34.2")


def test_the_control_plane_rolls_when_the_etcd_tag_changes() -> None:
    env = load_environment(read_stack_file(fixture_stack("prod")))
    assert len(env.control_plane.nodes) == 3

    def parts(version: str, environment: Environment = env) -> tuple[object, ...]:
        kubernetes = environment.kubernetes.model_copy(update={"version": version})
        return control_plane_parts(environment.model_copy(update={"kubernetes": kubernetes}))

    assert ("etcd", "3.5.32-0") in parts("1.33.6")
    assert parts("1.33.6") == parts("1.32.3")  # same tag: nothing rolls for it
    assert parts("1.34.2") != parts("1.33.6") and ("etcd", "3.6.13-0") in parts("1.34.2")
    assert parts("1.36.1") == parts("1.34.2")
    assert ("etcd", "3.7.0-0") in parts("1.37.1")
    # A lone control-plane node is never rolled for it: its replacement is a new, empty cluster.
    lone = env.model_copy(update={"control_plane": env.control_plane.model_copy(update={"nodes": env.control_plane.nodes[:1]})})
    assert parts("1.34.2", lone) == parts("1.33.6", lone)
    assert not [part for part in parts("1.34.2", lone) if isinstance(part, tuple) and part[0] == "etcd"]


def test_kubeadm_init_stores_the_stacks_etcd_tag_from_day_one() -> None:
    for version, tag in (("1.33.6", "3.5.32-0"), ("1.36.1", "3.6.13-0"), ("1.37.1", "3.7.0-0")):
        spec = ClusterSpec(**cluster_settings(kubernetes_version=version))
        documents = kubeadm_init_documents(spec, token="abcdef.0123456789abcdef")
        (cluster_configuration,) = [d for d in documents if d["kind"] == "ClusterConfiguration"]
        assert cluster_configuration["etcd"] == {"local": {"imageTag": tag}}
