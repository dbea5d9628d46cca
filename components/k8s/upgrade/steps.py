"""The cluster side of a Kubernetes version upgrade, against the API: what kubeadm stores, and the two
add-ons it runs, moved to the new version the way Cluster API's KubeadmControlPlane controller does.

Cluster API (kubernetes-sigs/cluster-api controlplane/kubeadm/internal/controllers/upgrade.go,
`upgradeControlPlane`) first sets `kubernetesVersion` in the ClusterConfiguration that kubeadm keeps
in `kube-system/kubeadm-config` (`UpdateKubernetesVersionInKubeadmConfigMap`), then rolls the
control-plane machines: a new control-plane node's `kubeadm join` reads that ClusterConfiguration
from the cluster and writes its static pods at its version. Only when no machine needs a rollout
any more does its reconcile update the kube-proxy DaemonSet's image and CoreDNS
(controllers/controller.go `reconcile`: the rollout branch returns first; then
`UpdateKubeProxyImageInfo`, `UpdateCoreDNS`). That order keeps the version skew policy: kube-proxy
must not be newer than kube-apiserver (https://kubernetes.io/releases/version-skew-policy/).

- `set_cluster_version`: before the first node is replaced. Reads the stored version and refuses
  a downgrade or a skipped minor (`versions.upgrade_refusal`) measured against the *cluster*, which
  may differ from the old stack file; writes only `kubernetesVersion`, with the ConfigMap's
  `resourceVersion` as a precondition, so a concurrent edit is refused instead of overwritten.
  With it, the stack's etcd image tag (`etcd.local.imageTag`, as the KubeadmControlPlane's
  ClusterConfiguration carries it), so every control-plane replacement joins with that etcd and
  not kubeadm's default for the minor; a change of that tag alone is written the same way.
- `set_addon_versions`: after the last control-plane node is back. Refuses while a control-plane
  kubelet still reports an older version (an API server there may still be old); sets the
  kube-proxy image tag to the version and the CoreDNS image tag to kubeadm's pin for the minor,
  keeping each image's registry (a mirror stays a mirror). The Corefile is left as it is: kubeadm's
  default Corefile uses no plugin deprecated between CoreDNS 1.11 and 1.13 (coredns/corefile-migration
  `migration/versions.go`); a customised one is the operator's to check.

  A limitation: it changes *only those two image tags*. `kubeadm upgrade apply` does more in its
  `addon` phase (kubernetes/kubernetes cmd/kubeadm/app/phases/addons/proxy and dns): it re-renders
  the kube-proxy ConfigMap (the KubeProxyConfiguration) and kube-proxy's RBAC, re-applies CoreDNS's
  ClusterRole, ClusterRoleBinding and ServiceAccount, and migrates the Corefile with
  coredns/corefile-migration (Cluster API's `UpdateCoreDNS` runs the same migration). None of that
  happens here; when a minor needs it, run on a control-plane node once all of them are at the
  new version `kubeadm upgrade apply phase addon all` (kubeadm >= 1.32; it reads the stored
  ClusterConfiguration this module moved). No `kubeadm upgrade node` is needed: every node is a new
  VM that joined at the version. docs/environments.md says the same for operators.

Pure of Pulumi: each function takes an API client (`KubeApi`, or the test double).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from components.k8s.api.client import quote
from components.k8s.kubeadm_pins import KUBEADM_PINS, kubeadm_pins
from components.k8s.rollout.drain import Api
from components.k8s.rollout.steps import CONTROL_PLANE_LABEL
from components.k8s.upgrade.versions import Version, coredns_version, upgrade_refusal, with_tag

KUBEADM_CONFIG = "/api/v1/namespaces/kube-system/configmaps/kubeadm-config"
"""`KubeadmConfigConfigMap` in kube-system; the document is under `ClusterConfigurationConfigMapKey`
(kubernetes/kubernetes cmd/kubeadm/app/constants/constants.go)."""
CLUSTER_CONFIGURATION_KEY = "ClusterConfiguration"
KUBE_PROXY = "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy"
COREDNS = "/apis/apps/v1/namespaces/kube-system/deployments/coredns"
"""kubeadm's add-on objects (`KubeProxy` DaemonSet, `CoreDNSDeploymentName`), containers named
`kube-proxy` and `coredns` (cmd/kubeadm/app/phases/addons/{proxy,dns}/manifests.go)."""
FIX = "run `pulumi up` again once the cluster answers; the upgrade resumes where it stopped"


class UpgradeError(Exception):
    """The cluster cannot take the upgrade, or the API server refused a call."""


def _get(api: Api, path: str, what: str) -> dict[str, Any]:
    try:
        answer = api.request("GET", path)
    except OSError as error:
        raise UpgradeError(f"reading {what}: the API server did not answer ({error}); {FIX}") from None
    if answer.status != 200:
        raise UpgradeError(f"reading {what}: HTTP {answer.status} {answer.message}".rstrip())
    return answer.body


def _patch(api: Api, path: str, body: dict[str, Any], what: str) -> None:
    try:
        answer = api.request("PATCH", path, body, patch=True)
    except OSError as error:
        raise UpgradeError(f"updating {what}: the API server did not answer ({error}); {FIX}") from None
    if answer.status == 409:
        raise UpgradeError(f"updating {what}: it changed while this ran (HTTP 409 {answer.message}); {FIX}")
    if answer.status != 200:
        raise UpgradeError(f"updating {what}: HTTP {answer.status} {answer.message}".rstrip())


def stored_version(api: Api) -> str:
    """The `kubernetesVersion` of the cluster's stored ClusterConfiguration, e.g. `v1.34.2`."""
    config = _get(api, KUBEADM_CONFIG, "kube-system/kubeadm-config")
    document = yaml.safe_load(str((config.get("data") or {}).get(CLUSTER_CONFIGURATION_KEY) or "")) or {}
    version = document.get("kubernetesVersion") if isinstance(document, dict) else None
    if not version:
        raise UpgradeError("kube-system/kubeadm-config holds no ClusterConfiguration with a kubernetesVersion")
    return str(version)


def cluster_initialised(api: Api) -> bool:
    """Whether a cluster answers at all and holds kubeadm's stored configuration: False while the API
    server does not answer or `kubeadm init` has not uploaded kube-system/kubeadm-config yet (day
    one: the first control-plane VM does not exist when the cluster step runs)."""
    try:
        answer = api.request("GET", KUBEADM_CONFIG)
    except OSError:
        return False
    if answer.status == 404:
        return False
    if answer.status != 200:
        raise UpgradeError(f"reading kube-system/kubeadm-config: HTTP {answer.status} {answer.message}".rstrip())
    return True


def kube_proxy_at(api: Api, target: str) -> bool:
    """Whether kube-proxy's container image carries `target`'s tag already (its add-on step then has
    nothing to do); a cluster without kubeadm's kube-proxy DaemonSet counts as at it."""
    try:
        answer = api.request("GET", KUBE_PROXY)
    except OSError as error:
        raise UpgradeError(
            f"reading DaemonSet kube-system/kube-proxy: the API server did not answer ({error}); {FIX}"
        ) from None
    if answer.status == 404:
        return True
    if answer.status != 200:
        raise UpgradeError(f"reading DaemonSet kube-system/kube-proxy: HTTP {answer.status} {answer.message}".rstrip())
    spec = ((answer.body.get("spec") or {}).get("template") or {}).get("spec") or {}
    images = [str(c.get("image") or "") for c in spec.get("containers") or [] if c.get("name") == "kube-proxy"]
    wanted = Version.parse(target).tag
    return all(with_tag(image, wanted) == image for image in images)


def stored_etcd_tag(document: dict[str, Any], version: str) -> str:
    """The etcd tag a control-plane node joining this ClusterConfiguration runs: `etcd.local.imageTag`
    when set (kubeadm `images.GetEtcdImage`), else kubeadm's pin for the stored minor (nearest entry
    outside the table, as kubeadm's `EtcdSupportedVersion` falls back)."""
    local = ((document.get("etcd") or {}).get("local") or {}) if isinstance(document.get("etcd"), dict) else {}
    tag = local.get("imageTag") if isinstance(local, dict) else None
    if tag:
        return str(tag)
    known = sorted(KUBEADM_PINS)
    minor = min(max(Version.parse(version).minor, known[0]), known[-1])
    return kubeadm_pins(minor).etcd


def set_cluster_version(
    api: Api,
    target: str,
    *,
    etcd_image_tag: str | None = None,
    before_change: Callable[[Version, Version], None] | None = None,
    before_etcd_change: Callable[[str, str], None] | None = None,
) -> str:
    """Sets the stored ClusterConfiguration's `kubernetesVersion` to `target` and, when given, its
    `etcd.local.imageTag` to `etcd_image_tag` (done before any node of the new version joins: every
    joining control-plane node reads both). Returns the version stored before. Already there:
    changes nothing.

    `before_change(stored, target)` runs once a version change is allowed by the version rules;
    `before_etcd_change(stored_etcd, target_etcd)` runs when the etcd the next control-plane node
    joins with changes (the stored tag, or kubeadm's pin of the minor, to `etcd_image_tag`, or to
    kubeadm's pin of the target minor when none is given). Both run before anything is written and
    raise UpgradeError to refuse it (the etcd gates)."""
    config = _get(api, KUBEADM_CONFIG, "kube-system/kubeadm-config")
    text = str((config.get("data") or {}).get(CLUSTER_CONFIGURATION_KEY) or "")
    document = yaml.safe_load(text) or {}
    current = str(document.get("kubernetesVersion") or "") if isinstance(document, dict) else ""
    if not current:
        raise UpgradeError("kube-system/kubeadm-config holds no ClusterConfiguration with a kubernetesVersion")
    wanted = Version.parse(target)
    stored_etcd = stored_etcd_tag(document, current)
    version_changes = Version.parse(current) != wanted
    etcd_target = etcd_image_tag or (stored_etcd if not version_changes else stored_etcd_tag({}, target))
    if not version_changes and etcd_target == stored_etcd:
        return current
    if version_changes:
        refusal = upgrade_refusal(current, target)
        if refusal is not None:
            raise UpgradeError(
                f"kubernetes.version: the cluster stores {current} (kube-system/kubeadm-config), and {refusal}; "
                "nothing was changed"
            )
        if before_change is not None:
            before_change(Version.parse(current), wanted)
    if before_etcd_change is not None and etcd_target != stored_etcd:
        before_etcd_change(stored_etcd, etcd_target)
    document["kubernetesVersion"] = wanted.tag
    if etcd_image_tag:
        # As Cluster API's KubeadmControlPlane keeps it (its ClusterConfiguration's
        # `etcd.local.imageTag`, written into kubeadm-config): every later `kubeadm join` of a
        # control-plane node runs this etcd, not kubeadm's default for the minor.
        etcd = document.setdefault("etcd", {})
        etcd.setdefault("local", {})["imageTag"] = etcd_image_tag
    # kubeadm writes the document with sorted keys (its YAML marshaller); so does this. Under the
    # ConfigMap's resourceVersion: the API server refuses the patch if it changed since the read.
    patch: dict[str, Any] = {"data": {CLUSTER_CONFIGURATION_KEY: yaml.safe_dump(document, sort_keys=True)}}
    resource_version = (config.get("metadata") or {}).get("resourceVersion")
    if resource_version is not None:
        patch["metadata"] = {"resourceVersion": resource_version}
    _patch(api, KUBEADM_CONFIG, patch, "kube-system/kubeadm-config")
    return current


def _control_plane_behind(api: Api, target: Version) -> list[str]:
    """Control-plane nodes whose kubelet reports an older version than `target`."""
    path = f"/api/v1/nodes?labelSelector={quote(CONTROL_PLANE_LABEL)}"
    nodes = _get(api, path, "the control-plane nodes").get("items") or []
    behind = []
    for node in nodes:
        kubelet = str(((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or "")
        name = str((node.get("metadata") or {}).get("name"))
        try:
            older = Version.parse(kubelet) < target
        except ValueError:
            older = True
        if older:
            behind.append(f"{name} ({kubelet or 'no version'})")
    return behind


def _set_container_image(api: Api, path: str, what: str, container: str, tag: str) -> bool:
    found = _get(api, path, what)
    containers = list(((((found.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")) or [])
    index = next((i for i, c in enumerate(containers) if c.get("name") == container), None)
    if index is None:
        raise UpgradeError(f"{what} has no container {container!r}: not kubeadm's add-on; upgrade it yourself")
    image = str(containers[index].get("image") or "")
    new_image = with_tag(image, tag)
    if new_image == image:
        return False
    containers[index] = {**containers[index], "image": new_image}
    # A merge patch replaces a list whole: the containers as read, one image changed, under the
    # object's resourceVersion (the API server refuses the patch if the object changed since).
    patch: dict[str, Any] = {"spec": {"template": {"spec": {"containers": containers}}}}
    resource_version = (found.get("metadata") or {}).get("resourceVersion")
    if resource_version is not None:
        patch["metadata"] = {"resourceVersion": resource_version}
    _patch(api, path, patch, what)
    return True


def set_addon_versions(api: Api, target: str) -> list[str]:
    """kube-proxy's image tag at `target`, CoreDNS's at kubeadm's pin for its minor, once every
    control-plane node runs `target`: the image tags only, not their config, RBAC or Corefile (the
    module docstring's limitation). Returns what it changed (for the log)."""
    wanted = Version.parse(target)
    behind = _control_plane_behind(api, wanted)
    if behind:
        raise UpgradeError(
            f"kube-proxy and CoreDNS stay at their version: control-plane node(s) {', '.join(behind)} do not run "
            f"{wanted} yet, and kube-proxy must not be newer than an API server; {FIX}"
        )
    changed = []
    if _set_container_image(api, KUBE_PROXY, "DaemonSet kube-system/kube-proxy", "kube-proxy", wanted.tag):
        changed.append(f"kube-proxy {wanted.tag}")
    dns = coredns_version(target)
    if _set_container_image(api, COREDNS, "Deployment kube-system/coredns", "coredns", dns):
        changed.append(f"CoreDNS {dns}")
    return changed
