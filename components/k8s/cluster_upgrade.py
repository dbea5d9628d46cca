"""ClusterUpgrade: a Kubernetes version change, on the cluster's side, around the rolling node change.

A `kubernetes.version` change rolls every node (the version is part of each node's rollout step,
`components.k8s.rollout`), control plane first. Two of these resources put the cluster-wide part
where Cluster API's KubeadmControlPlane controller puts it (`cluster_upgrade_steps` cites it):

- step `cluster-configuration` (`cluster-version`): every rollout gate depends on it, so its
  `update` runs before the first node is replaced: the stored ClusterConfiguration's
  `kubernetesVersion` is set, which the new control-plane nodes' `kubeadm join` reads. It refuses
  a downgrade or a skipped minor measured against the cluster itself.
- step `addons` (`cluster-addons-version`): depends on the last control-plane node's settle, so its
  `update` runs once every control-plane node is back at the new version: kube-proxy's image and
  CoreDNS. Workers roll beside it (kube-proxy may be newer than the kubelets it runs beside, by up
  to three minors: the version skew policy).

Day one (`create`): nothing to do: `kubeadm init` stores the version and deploys both add-ons.
Only a version change updates either (`diff` looks at nothing else); a failed update fails the
`pulumi up` there, and the next run retries it (its state keeps the old version until it worked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pulumi
import pulumi.dynamic as dynamic

from components.dynamic_resource import DynamicResource
from components.k8s.cluster_upgrade_steps import UpgradeError, set_addon_versions, set_cluster_version
from components.k8s.kube_api import KubeApi, KubeconfigError

UpgradeStep = Literal["cluster-configuration", "addons"]


class ClusterUpgradeProvider(dynamic.ResourceProvider):
    serialize_as_secret_always = False  # the kubeconfig is a secret input, encrypted in state

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        return dynamic.CreateResult(id_=str(props["step"]), outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        # A new kubeconfig (a rotated client certificate) is no reason to run a step again.
        return dynamic.DiffResult(changes=olds.get("version") != news.get("version"))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        version, step = str(news["version"]), str(news["step"])
        try:
            api = KubeApi(str(news["kubeconfig"]))
        except KubeconfigError as error:
            raise UpgradeError(f"upgrading to Kubernetes {version}: {error}") from None
        if step == "cluster-configuration":
            before = set_cluster_version(api, version)
            pulumi.log.info(f"kube-system/kubeadm-config: kubernetesVersion {before} -> v{version}")
        else:
            changed = set_addon_versions(api, version)
            pulumi.log.info(f"add-ons at Kubernetes {version}: {', '.join(changed) or 'already there'}")
        return dynamic.UpdateResult(outs=news)

    def read(self, id_: str, props: dict[str, Any]) -> dynamic.ReadResult:
        return dynamic.ReadResult(id_=id_, outs=props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing to undo: the cluster keeps its version."""


@dataclass(frozen=True, kw_only=True)
class ClusterUpgradeArgs:
    step: UpgradeStep
    """`cluster-configuration` (before any node is replaced) or `addons` (after the control plane)."""
    version: str
    """The stack's Kubernetes version (`kubernetes.version`), e.g. "1.35.0"."""
    kubeconfig: pulumi.Input[str]
    """Admin kubeconfig (a secret; encrypted in state); must not depend on the node VMs."""


class ClusterUpgrade(DynamicResource, module="kubernetes", name="ClusterUpgrade"):
    """One cluster-wide step of a version upgrade (see the module docstring)."""

    def __init__(self, name: str, args: ClusterUpgradeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = {"step": args.step, "version": args.version, "kubeconfig": pulumi.Output.secret(args.kubeconfig)}
        super().__init__(ClusterUpgradeProvider(), name, inputs, opts)
