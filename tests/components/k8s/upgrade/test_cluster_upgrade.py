"""A Kubernetes version upgrade, the cluster side: kubeadm's stored ClusterConfiguration, kube-proxy
and CoreDNS, against the API double holding the objects exactly as kubeadm stores them.

The ConfigMap is what `kubeadm init` uploads (phases/uploadconfig: the v1beta4 ClusterConfiguration
marshalled with sorted keys under `data.ClusterConfiguration`), the DaemonSet and Deployment carry
kubeadm's container names and images (phases/addons/proxy and dns manifests), and every object has
a resourceVersion that the double moves on at each write and checks as a patch precondition, as
the API server does.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.k8s.api.client import Response
from components.k8s.facts import SUPPORTED_KUBERNETES_MINORS
from components.k8s.rollout.steps import CONTROL_PLANE_LABEL
from components.k8s.upgrade.steps import (
    KUBEADM_CONFIG,
    UpgradeError,
    set_addon_versions,
    set_cluster_version,
    stored_version,
)
from components.k8s.upgrade.upgrade import ClusterUpgradeProvider
from components.k8s.upgrade.versions import KUBEADM_COREDNS_VERSIONS, upgrade_refusal, with_tag
from tests.components.k8s.kube_double import KubeDouble, served

CLUSTER_CONFIGURATION_1_34 = """\
apiServer:
  certSANs:
  - k8s-staging.example.com
  - cp-1
  - 10.20.0.11
apiVersion: kubeadm.k8s.io/v1beta4
caCertificateValidityPeriod: 87600h0m0s
certificateValidityPeriod: 8760h0m0s
certificatesDir: /etc/kubernetes/pki
clusterName: staging-gpu-k8s
controlPlaneEndpoint: k8s-staging.example.com:6443
controllerManager: {}
dns: {}
encryptionAlgorithm: RSA-2048
etcd:
  local:
    dataDir: /var/lib/etcd
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: v1.34.2
networking:
  dnsDomain: cluster.local
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
proxy: {}
scheduler: {}
"""


def cluster(version: str = "v1.34.2", *, coredns: str = "v1.12.1", registry: str = "registry.k8s.io") -> KubeDouble:
    kube = KubeDouble()
    kube.configmaps["kube-system/kubeadm-config"] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kubeadm-config", "namespace": "kube-system", "resourceVersion": "210"},
        "data": {"ClusterConfiguration": CLUSTER_CONFIGURATION_1_34.replace("v1.34.2", version)},
    }
    kube.apps["daemonsets/kube-system/kube-proxy"] = workload(
        "DaemonSet", "kube-proxy", [("kube-proxy", f"{registry}/kube-proxy:{version}")]
    )
    kube.apps["deployments/kube-system/coredns"] = workload(
        "Deployment", "coredns", [("coredns", f"{registry}/coredns/coredns:{coredns}")]
    )
    for name in ("cp-1", "cp-2", "cp-3"):
        kube.add_node(name, labels={CONTROL_PLANE_LABEL: ""})
        kube.nodes[name]["status"]["nodeInfo"]["kubeletVersion"] = version
    kube.add_node("worker-1")
    kube.nodes["worker-1"]["status"]["nodeInfo"]["kubeletVersion"] = version
    return kube


def workload(kind: str, name: str, containers: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "kube-system", "resourceVersion": "400"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": c, "image": image, "command": [f"/usr/local/bin/{c}"]} for c, image in containers
                    ]
                }
            }
        },
    }


def stored(kube: KubeDouble) -> dict[str, Any]:
    document = yaml.safe_load(kube.configmaps["kube-system/kubeadm-config"]["data"]["ClusterConfiguration"])
    assert isinstance(document, dict)
    return document


def image(kube: KubeDouble, key: str) -> str:
    return str(kube.apps[key]["spec"]["template"]["spec"]["containers"][0]["image"])


# --- the stored ClusterConfiguration: before any node is replaced ---------------------------------


def test_one_minor_up_sets_kubernetes_version_and_keeps_everything_else() -> None:
    kube = cluster()
    before = stored(kube)
    assert set_cluster_version(kube, "1.35.0") == "v1.34.2"
    after = stored(kube)
    assert after["kubernetesVersion"] == "v1.35.0"
    assert {k: v for k, v in after.items() if k != "kubernetesVersion"} == {
        k: v for k, v in before.items() if k != "kubernetesVersion"
    }
    assert stored_version(kube) == "v1.35.0"
    assert kube.calls.count(("PATCH", KUBEADM_CONFIG)) == 1


def test_already_at_the_version_changes_nothing() -> None:
    """A re-run after a failure later in the rollout, or a cluster upgraded by hand."""
    kube = cluster("v1.35.0")
    assert set_cluster_version(kube, "1.35.0") == "v1.35.0"
    assert ("PATCH", KUBEADM_CONFIG) not in kube.calls


@pytest.mark.parametrize(
    ("cluster_at", "target", "says"),
    [
        ("v1.33.6", "1.35.0", "upgrade through 1.34 first"),
        ("v1.34.2", "1.33.6", "is a downgrade"),
        ("v1.34.2", "1.34.1", "is a downgrade"),
    ],
)
def test_the_cluster_itself_decides_skew_and_nothing_is_written(cluster_at: str, target: str, says: str) -> None:
    """Measured against what the cluster stores, not the old stack file: a cluster left behind (or
    upgraded by hand) is caught here, before a node is touched."""
    kube = cluster(cluster_at)
    with pytest.raises(UpgradeError) as refused:
        set_cluster_version(kube, target)
    assert "kubernetes.version" in str(refused.value) and says in str(refused.value)
    assert f"the cluster stores {cluster_at}" in str(refused.value)
    assert all(method == "GET" for method, _ in kube.calls)


def test_a_concurrent_edit_is_refused_not_overwritten() -> None:
    kube = cluster()

    class EditedMeanwhile:
        """Someone runs `kubectl edit cm kubeadm-config` between our read and our write."""

        def request(self, method: str, path: str, body: Any = None, *, patch: bool = False) -> Response:
            if method == "PATCH":
                kube.request("PATCH", path, {"data": {"note": "edited"}}, patch=True)
            return kube.request(method, path, body, patch=patch)

    kube.configmaps["kube-system/kubeadm-config"]["metadata"]["resourceVersion"] = "210"
    with pytest.raises(UpgradeError, match="changed while this ran"):
        set_cluster_version(EditedMeanwhile(), "1.35.0")
    assert stored(kube)["kubernetesVersion"] == "v1.34.2"


# --- kube-proxy and CoreDNS: after the last control-plane node ------------------------------------


def test_addons_wait_for_every_control_plane_kubelet_at_the_version() -> None:
    kube = cluster()
    set_cluster_version(kube, "1.35.0")
    kube.nodes["cp-1"]["status"]["nodeInfo"]["kubeletVersion"] = "v1.35.0"
    with pytest.raises(UpgradeError) as refused:
        set_addon_versions(kube, "1.35.0")
    assert "cp-2 (v1.34.2), cp-3 (v1.34.2)" in str(refused.value)
    assert "kube-proxy must not be newer than an API server" in str(refused.value)
    assert image(kube, "daemonsets/kube-system/kube-proxy") == "registry.k8s.io/kube-proxy:v1.34.2"


def test_addons_move_to_the_version_and_kubeadms_coredns_for_its_minor() -> None:
    kube = cluster()
    for name in ("cp-1", "cp-2", "cp-3"):
        kube.nodes[name]["status"]["nodeInfo"]["kubeletVersion"] = "v1.35.0"
    # Workers may still run 1.34: kube-proxy may be newer than the kubelet beside it.
    assert set_addon_versions(kube, "1.35.0") == ["kube-proxy v1.35.0", "CoreDNS v1.13.1"]
    assert image(kube, "daemonsets/kube-system/kube-proxy") == "registry.k8s.io/kube-proxy:v1.35.0"
    assert image(kube, "deployments/kube-system/coredns") == "registry.k8s.io/coredns/coredns:v1.13.1"
    container = kube.apps["daemonsets/kube-system/kube-proxy"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/usr/local/bin/kube-proxy"]  # the rest of the container kept
    assert set_addon_versions(kube, "1.35.0") == []  # again: nothing to do


def test_a_mirrored_registry_stays_the_registry() -> None:
    kube = cluster(registry="harbor.lab.example.com:5000/k8s")
    for name in ("cp-1", "cp-2", "cp-3"):
        kube.nodes[name]["status"]["nodeInfo"]["kubeletVersion"] = "v1.34.3"
    set_addon_versions(kube, "1.34.3")  # a patch release: CoreDNS stays
    assert image(kube, "daemonsets/kube-system/kube-proxy") == "harbor.lab.example.com:5000/k8s/kube-proxy:v1.34.3"
    assert image(kube, "deployments/kube-system/coredns") == "harbor.lab.example.com:5000/k8s/coredns/coredns:v1.12.1"


def test_the_provider_runs_a_step_only_for_a_new_version_over_http() -> None:
    kube = cluster()
    provider = ClusterUpgradeProvider()
    with served(kube) as kubeconfig:
        olds = {"step": "cluster-configuration", "version": "1.34.2", "kubeconfig": "old"}
        news = {**olds, "version": "1.35.0", "kubeconfig": kubeconfig}
        assert not provider.diff("x", olds, {**olds, "kubeconfig": kubeconfig}).changes
        assert provider.diff("x", olds, news).changes
        provider.update("x", olds, news)
    assert stored(kube)["kubernetesVersion"] == "v1.35.0"
    # Day one (the server is gone: no cluster answers): kubeadm init stores the version itself.
    assert provider.create(news).outs == {**news, "applied": False}


# --- the rules themselves ---------------------------------------------------------------------------


def test_every_supported_minor_has_kubeadms_coredns() -> None:
    assert set(KUBEADM_COREDNS_VERSIONS) == set(SUPPORTED_KUBERNETES_MINORS)


@pytest.mark.parametrize(
    ("current", "target", "refused"),
    [
        ("1.34.2", "1.34.2", False),
        ("1.34.2", "1.34.5", False),
        ("1.34.2", "1.35.0", False),
        ("1.33.6", "1.35.0", True),
        ("1.35.0", "1.34.2", True),
        ("v1.34.2", "1.35.1", False),
    ],
)
def test_one_minor_at_a_time_and_never_down(current: str, target: str, refused: bool) -> None:
    assert (upgrade_refusal(current, target) is not None) == refused


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("registry.k8s.io/kube-proxy:v1.34.2", "registry.k8s.io/kube-proxy:v1.35.0"),
        ("localhost:5000/kube-proxy", "localhost:5000/kube-proxy:v1.35.0"),
        ("registry.k8s.io/kube-proxy:v1.34.2@sha256:" + "a" * 64, "registry.k8s.io/kube-proxy:v1.35.0"),
    ],
)
def test_with_tag_keeps_registry_and_port(before: str, after: str) -> None:
    assert with_tag(before, "v1.35.0") == after


# --- the first run after this feature reached an existing stack: `create`, not `update` -------------


def test_create_on_an_existing_cluster_moves_the_stored_version_before_any_gate() -> None:
    """The resource is new in state while the cluster already runs at the old version: without this,
    the new control-plane VMs' `kubeadm join` reads v1.34.2 and its KubeletVersion preflight fails
    after the first member is gone."""
    kube = cluster()
    with served(kube) as kubeconfig:
        outs = (
            ClusterUpgradeProvider()
            .create({"step": "cluster-configuration", "version": "1.35.0", "kubeconfig": kubeconfig})
            .outs
        )
    assert stored(kube)["kubernetesVersion"] == "v1.35.0"
    assert outs is not None and outs["applied"] is True


def test_create_refuses_a_skipped_minor_measured_against_the_cluster() -> None:
    kube = cluster("v1.33.6")
    with served(kube) as kubeconfig, pytest.raises(UpgradeError, match=r"upgrade through 1\.34 first"):
        ClusterUpgradeProvider().create(
            {"step": "cluster-configuration", "version": "1.35.0", "kubeconfig": kubeconfig}
        )
    assert stored(kube)["kubernetesVersion"] == "v1.33.6"


def test_create_at_the_version_changes_nothing_and_the_addons_step_catches_up_too() -> None:
    kube = cluster()
    with served(kube) as kubeconfig:
        ClusterUpgradeProvider().create(
            {"step": "cluster-configuration", "version": "1.34.2", "kubeconfig": kubeconfig}
        )
        ClusterUpgradeProvider().create({"step": "addons", "version": "1.34.2", "kubeconfig": kubeconfig})
    assert all(method == "GET" for method, _ in kube.calls)
    kube = cluster()
    for name in ("cp-1", "cp-2", "cp-3"):
        kube.nodes[name]["status"]["nodeInfo"]["kubeletVersion"] = "v1.35.0"
    with served(kube) as kubeconfig:
        ClusterUpgradeProvider().create({"step": "addons", "version": "1.35.0", "kubeconfig": kubeconfig})
    assert image(kube, "daemonsets/kube-system/kube-proxy") == "registry.k8s.io/kube-proxy:v1.35.0"


def test_create_on_day_one_finds_no_cluster_and_the_next_run_checks_again() -> None:
    """Day one: no VM exists when this runs (every gate, so every VM, comes after it); the API does
    not answer. Nothing to do (`kubeadm init` stores the version), but the state says it was not
    checked, so the next run's `update` checks."""
    kube = cluster()
    with served(kube) as kubeconfig:
        pass  # the server is gone: a kubeconfig for an endpoint that does not answer
    provider = ClusterUpgradeProvider()
    props = {"step": "cluster-configuration", "version": "1.35.0", "kubeconfig": kubeconfig}
    outs = provider.create(props).outs
    assert outs is not None and outs["applied"] is False
    assert provider.diff("x", outs, dict(props)).changes
    assert not provider.diff("x", {**props, "applied": True}, dict(props)).changes
