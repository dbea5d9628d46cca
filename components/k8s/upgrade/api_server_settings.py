"""The API server's hardening in the ClusterConfiguration that kubeadm keeps in the cluster.

Why: kubeadm writes each control-plane node's kube-apiserver manifest from a ClusterConfiguration.
`kubeadm init` takes it from its config file and uploads it to `kube-system/kubeadm-config`
(phases/uploadconfig); every later control-plane `kubeadm join` ignores any local copy and reads
that stored one (kubernetes/kubernetes cmd/kubeadm/app/util/config/cluster.go,
`FetchInitConfigurationFromCluster` -> `getInitConfigurationFromCluster`, which reads
`data.ClusterConfiguration` of the `kubeadm-config` ConfigMap). A cluster created before the
Pod Security defaults, the audit log and Secrets encryption existed (issue 37) stores none of
their flags, so a control-plane node that joins it, even a new VM carrying the files, starts an API
server without them: a mixed control plane that writes some Secrets in plaintext.

`set_api_server_settings` merges the stack's `apiServer.extraArgs` and `extraVolumes`
(`components.k8s.node_bootstrap.api_server.api_server_settings`) into the stored document: flags
by name and volumes by name, the stack's value winning where both name the same one, anything
else an operator added kept. It runs in the `cluster-configuration` step of `ClusterUpgrade`,
which every rollout gate depends on, so the stored copy carries the settings before any
control-plane node is replaced; the control-plane generation carries them too
(`stacks.wiring.rollout`), so their arrival or change rolls the control plane onto new VMs, which
have the files (cloud-init) and read these flags. A version upgrade changes only
`kubernetesVersion` (`steps.set_cluster_version`) and keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from components.k8s.rollout.drain import Api
from components.k8s.upgrade.steps import CLUSTER_CONFIGURATION_KEY, KUBEADM_CONFIG, UpgradeError, _get, _patch


def _merged_args(stored: Any, wanted: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """v1beta4 `extraArgs` (a list of name/value; v1beta3's map is read as one) with `wanted`'s."""
    if isinstance(stored, Mapping):
        stored = [{"name": str(k), "value": str(v)} for k, v in stored.items()]
    merged = {str(a.get("name")): dict(a) for a in stored or [] if isinstance(a, Mapping)}
    for arg in wanted:
        merged[arg["name"]] = dict(arg)
    return list(merged.values())


def _merged_volumes(stored: Any, wanted: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    merged = {str(v.get("name")): dict(v) for v in stored or [] if isinstance(v, Mapping)}
    for volume in wanted:
        merged[str(volume["name"])] = dict(volume)
    return list(merged.values())


def set_api_server_settings(api: Api, settings: Mapping[str, Any]) -> bool:
    """Merge `settings` (`extraArgs`, `extraVolumes`) into the stored ClusterConfiguration's
    `apiServer`. Returns whether it wrote anything (already there: no write)."""
    config = _get(api, KUBEADM_CONFIG, "kube-system/kubeadm-config")
    text = str((config.get("data") or {}).get(CLUSTER_CONFIGURATION_KEY) or "")
    document = yaml.safe_load(text) or {}
    if not isinstance(document, dict) or document.get("kind") != "ClusterConfiguration":
        raise UpgradeError("kube-system/kubeadm-config holds no ClusterConfiguration")
    api_server = dict(document.get("apiServer") or {})
    before = {k: api_server.get(k) for k in ("extraArgs", "extraVolumes")}
    api_server["extraArgs"] = _merged_args(api_server.get("extraArgs"), settings.get("extraArgs") or [])
    api_server["extraVolumes"] = _merged_volumes(api_server.get("extraVolumes"), settings.get("extraVolumes") or [])
    if {k: api_server[k] for k in before} == before:
        return False
    document["apiServer"] = api_server
    # As `set_cluster_version`: sorted keys (kubeadm's marshaller), under the ConfigMap's
    # resourceVersion, so a concurrent edit is refused instead of overwritten.
    patch: dict[str, Any] = {"data": {CLUSTER_CONFIGURATION_KEY: yaml.safe_dump(document, sort_keys=True)}}
    resource_version = (config.get("metadata") or {}).get("resourceVersion")
    if resource_version is not None:
        patch["metadata"] = {"resourceVersion": resource_version}
    _patch(api, KUBEADM_CONFIG, patch, "kube-system/kubeadm-config")
    return True
