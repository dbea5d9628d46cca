"""Issue 40 item 3: the API server's hardening (Pod Security defaults, audit, Secrets encryption)
reaches a running cluster. Its flags and volumes go into the ClusterConfiguration that kubeadm keeps
in kube-system/kubeadm-config, which every control-plane `kubeadm join` reads back to write its
kube-apiserver manifest (kubernetes/kubernetes cmd/kubeadm/app/util/config/cluster.go,
`FetchInitConfigurationFromCluster`), before any control-plane node is replaced; the control-plane
generation carries the settings, so a change to them (or their arrival on a cluster deployed
before them) rolls the control plane onto new VMs that have the files.

Against the API double holding kubeadm-config as kubeadm stores it (test_cluster_upgrade.py).
"""

from __future__ import annotations

from typing import Any

import yaml

from components.k8s.node_bootstrap.api_server import api_server_settings
from components.k8s.upgrade.steps import KUBEADM_CONFIG
from components.k8s.upgrade.upgrade import ClusterUpgradeProvider
from tests.components.k8s.kube_double import served
from tests.components.k8s.upgrade.test_cluster_upgrade import cluster, stored


def _args(document: dict[str, Any]) -> dict[str, str]:
    return {a["name"]: a["value"] for a in document["apiServer"].get("extraArgs", [])}


def _step(kubeconfig: str, **extra: Any) -> dict[str, Any]:
    return {
        "step": "cluster-configuration",
        "version": "1.34.2",
        "kubeconfig": kubeconfig,
        "api_server": api_server_settings(),
        **extra,
    }


def test_a_cluster_deployed_before_the_hardening_gets_it_in_its_stored_configuration() -> None:
    """The resource is in state already, at the same version: the new `api_server` input alone is
    a change, and its update writes the settings (not the version: it is where it was)."""
    kube = cluster()
    before = stored(kube)
    provider = ClusterUpgradeProvider()
    with served(kube) as kubeconfig:
        olds = {"step": "cluster-configuration", "version": "1.34.2", "kubeconfig": kubeconfig, "applied": True}
        news = _step(kubeconfig)
        assert provider.diff("x", olds, news).changes
        provider.update("x", olds, news)
    after = stored(kube)
    wanted = api_server_settings()
    assert _args(after) == {a["name"]: a["value"] for a in wanted["extraArgs"]}
    assert after["apiServer"]["extraVolumes"] == wanted["extraVolumes"]
    # Everything else as kubeadm stored it.
    assert after["apiServer"]["certSANs"] == before["apiServer"]["certSANs"]
    assert {k: v for k, v in after.items() if k != "apiServer"} == {k: v for k, v in before.items() if k != "apiServer"}


def test_create_on_a_running_cluster_writes_the_settings_too() -> None:
    kube = cluster()
    with served(kube) as kubeconfig:
        outs = ClusterUpgradeProvider().create(_step(kubeconfig)).outs
    assert outs is not None and outs["applied"] is True
    assert "encryption-provider-config" in _args(stored(kube))


def test_an_operators_own_flags_stay_and_ours_win_where_they_meet() -> None:
    kube = cluster()
    document = stored(kube)
    document["apiServer"]["extraArgs"] = [
        {"name": "audit-log-maxage", "value": "7"},
        {"name": "oidc-issuer-url", "value": "https://sso.example.com"},
    ]
    document["apiServer"]["extraVolumes"] = [{"name": "oidc-ca", "hostPath": "/etc/oidc", "mountPath": "/etc/oidc"}]
    kube.configmaps["kube-system/kubeadm-config"]["data"]["ClusterConfiguration"] = yaml.safe_dump(document)
    with served(kube) as kubeconfig:
        ClusterUpgradeProvider().create(_step(kubeconfig))
    after = stored(kube)
    args = _args(after)
    assert args["oidc-issuer-url"] == "https://sso.example.com"
    assert args["audit-log-maxage"] == "30"
    assert after["apiServer"]["extraVolumes"][0]["name"] == "oidc-ca"


def test_settings_already_stored_change_nothing() -> None:
    kube = cluster()
    with served(kube) as kubeconfig:
        ClusterUpgradeProvider().create(_step(kubeconfig))
        writes = kube.calls.count(("PATCH", KUBEADM_CONFIG))
        ClusterUpgradeProvider().create(_step(kubeconfig))
        assert kube.calls.count(("PATCH", KUBEADM_CONFIG)) == writes == 1
        olds = {**_step(kubeconfig), "applied": True}
        assert not ClusterUpgradeProvider().diff("x", olds, _step(kubeconfig)).changes


def test_a_version_upgrade_keeps_the_settings() -> None:
    kube = cluster()
    with served(kube) as kubeconfig:
        ClusterUpgradeProvider().create(_step(kubeconfig))
        olds = {**_step(kubeconfig), "applied": True}
        ClusterUpgradeProvider().update("x", olds, _step(kubeconfig, version="1.35.0"))
    after = stored(kube)
    assert after["kubernetesVersion"] == "v1.35.0"
    assert "audit-policy-file" in _args(after)
