"""ClusterUpgrade: a Kubernetes version change, on the cluster's side, around the rolling node change.

A `kubernetes.version` change rolls every node (the version is part of each node's rollout step,
`components.k8s.rollout.rollout`), control plane first. Two of these resources put the cluster-wide part
where Cluster API's KubeadmControlPlane controller puts it (`cluster_upgrade_steps` cites it):

- step `cluster-configuration` (`cluster-version`): every rollout gate depends on it, so its
  `update` runs before the first node is replaced: the stored ClusterConfiguration's
  `kubernetesVersion` is set, which the new control-plane nodes' `kubeadm join` reads. It refuses
  a downgrade or a skipped minor measured against the cluster itself.
- step `addons` (`cluster-addons-version`): depends on the last control-plane node's settle, so its
  `update` runs once every control-plane node is back at the new version: kube-proxy's and
  CoreDNS's image tags, and only those (not their ConfigMaps, RBAC or Corefile, which `kubeadm
  upgrade apply` also renders: `cluster_upgrade_steps` says what to run when a minor needs them).
  Workers roll beside it (kube-proxy may be newer than the kubelets it runs beside, by up to three
  minors: the version skew policy).

`create` runs the same step as `update` whenever a cluster answers: the resource is new in the
state of a stack deployed before it existed, and that stack's cluster may store an older version
than the stack file (the version edited in the same run that brought these resources). Had `create`
done nothing there, the nodes would roll (or, with the gates adopting the version in place, not
roll) against a kubeadm-config still at the old version, and a new control-plane node's
`kubeadm join` fails its KubeletVersion preflight check (a kubelet newer than the stored
control-plane version is fatal: kubernetes/kubernetes cmd/kubeadm/app/preflight/checks.go,
`KubeletVersionCheck`) after the VM it replaces, and its etcd member, are gone. The same skew
checks apply. Day one: the API server does not answer (no VM exists yet: every gate, so every VM,
comes after this step), so there is nothing to do, as `kubeadm init` stores the version and deploys
both add-ons; the state records `applied: false`, so the next run's `update` checks again.

Otherwise only a version change updates either (`diff` looks at nothing else); a failed update
fails the `pulumi up` there, and the next run retries it (its state keeps the old version until it
worked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pulumi

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.k8s.api.client import KubeApi, KubeconfigError
from components.k8s.upgrade.steps import (
    UpgradeError,
    cluster_initialised,
    kube_proxy_at,
    set_addon_versions,
    set_cluster_version,
)

UpgradeStep = Literal["cluster-configuration", "addons"]


class ClusterUpgradeProvider(handlers.ResourceHandlers):
    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        # Day one: `applied: false` (no cluster answered), and the next run checks (module docstring).
        return handlers.CreateResult(id_=str(props["step"]), outs={**props, "applied": _catch_up(props)})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        # A new kubeconfig (a rotated client certificate) is no reason to run a step again; a step
        # created before the cluster answered (day one) is.
        return handlers.DiffResult(changes=olds.get("version") != news.get("version") or olds.get("applied") is False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        if olds.get("version") == news.get("version"):  # only the check a day-one create left
            return handlers.UpdateResult(outs={**news, "applied": _catch_up(news)})
        _run(_api(news), str(news["step"]), str(news["version"]))
        return handlers.UpdateResult(outs={**news, "applied": True})

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        return handlers.ReadResult(id_=id_, outs=props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing to undo: the cluster keeps its version."""


def _api(props: dict[str, Any]) -> KubeApi:
    try:
        return KubeApi(str(props["kubeconfig"]))
    except KubeconfigError as error:
        raise UpgradeError(f"upgrading to Kubernetes {props['version']}: {error}") from None


def _run(api: KubeApi, step: str, version: str) -> None:
    if step == "cluster-configuration":
        before = set_cluster_version(api, version)
        pulumi.log.info(f"kube-system/kubeadm-config: kubernetesVersion {before} -> v{version}")
    else:
        changed = set_addon_versions(api, version)
        pulumi.log.info(f"add-ons at Kubernetes {version}: {', '.join(changed) or 'already there'}")


def _catch_up(props: dict[str, Any]) -> bool:
    """The step for a cluster this resource has not seen run: nothing when no cluster answers
    (returns False), else the step when the cluster is not at the version (the stored
    kubernetesVersion; for the add-ons, kube-proxy's tag), with the same checks as an upgrade."""
    version, step = str(props["version"]), str(props["step"])
    api = _api(props)
    if not cluster_initialised(api):
        pulumi.log.info(f"Kubernetes {version}, step {step}: no cluster answers yet; kubeadm init sets it up")
        return False
    if step == "addons" and kube_proxy_at(api, version):
        return True
    _run(api, step, version)  # the cluster-configuration step changes nothing when already there
    return True


@dataclass(frozen=True, kw_only=True)
class ClusterUpgradeArgs:
    step: UpgradeStep
    """`cluster-configuration` (before any node is replaced) or `addons` (after the control plane)."""
    version: str
    """The stack's Kubernetes version (`kubernetes.version`), e.g. "1.35.0"."""
    kubeconfig: pulumi.Input[str]
    """Admin kubeconfig (a secret; encrypted in state); must not depend on the node VMs."""


class ClusterUpgrade(GpuclusterResource, module="kubernetes", name="ClusterUpgrade"):
    """One cluster-wide step of a version upgrade (see the module docstring)."""

    def __init__(self, name: str, args: ClusterUpgradeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = {"step": args.step, "version": args.version, "kubeconfig": pulumi.Output.secret(args.kubeconfig)}
        super().__init__(name, inputs, opts)
