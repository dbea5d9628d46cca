"""ClusterAccess: the one explicit Kubernetes provider the whole Kubernetes layer uses.

Two ways in, one component:

- bootstrap mode (`ClusterAccessArgs.for_bootstrap`): the admin kubeconfig Pulumi generated in
  `ClusterBootstrap`, and the provider depends on `ApiServerReady`, so no Kubernetes resource is
  sent before the new API server answers AND authorises that kubeconfig's certificate (kubeadm
  binds its group only after the server starts: an earlier apply would be refused with 403);
- existing-cluster mode (`ClusterAccessArgs.for_existing_cluster`): a kubeconfig the stack holds
  as a secret (config key `vsphere-gpu-cluster:kubeconfig`, read with `require_secret`).

Provider settings and why:
- `enable_server_side_apply=True`: the MPI Operator CRD is too large for client-side apply's
  last-applied annotation (it is the provider's default today; set so a default change cannot
  break us);
- `cluster_identifier`: the provider is replaced (and with it every resource it manages) only
  when this changes, not when the kubeconfig's content changes, e.g. when `pulumi up` renews
  the admin client certificate;
- `delete_unreachable=False` (default): a cluster that cannot be reached is an error, never a
  reason to silently drop resources from state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.k8s.bootstrap import ClusterBootstrap


@dataclass(frozen=True, kw_only=True)
class ClusterAccessArgs:
    kubeconfig: pulumi.Input[str]
    """Contents of an admin kubeconfig; treated as a secret whatever is passed."""
    cluster_identifier: str
    """Stable name of the cluster: the provider (and every object it manages) is replaced only
    when this changes. Use the cluster name."""
    wait_for: Sequence[pulumi.Resource] = ()
    """Resources the provider must wait for before its first API call. Default none (an
    existing cluster is assumed to be up: the first apply fails clearly if it is not); bootstrap
    mode passes the `ApiServerReady` resource, without which the first apply races kubeadm."""
    context: str | None = None
    """kubeconfig context to use. Default: the kubeconfig's current context (the only one in
    the kubeconfig `ClusterBootstrap` renders); name one when an existing kubeconfig has several,
    else whichever is current on the machine that wrote it wins."""

    def __post_init__(self) -> None:
        if not self.cluster_identifier:
            raise ValueError("cluster_identifier must not be empty")

    @classmethod
    def for_bootstrap(
        cls, bootstrap: ClusterBootstrap, wait_for: Sequence[pulumi.Resource], *, cluster_identifier: str
    ) -> ClusterAccessArgs:
        """Access to a cluster this program bootstraps: its kubeconfig, after `wait_for` (its
        `ApiServerReady` and the control-plane VMs: see `__main__.py`)."""
        return cls(
            kubeconfig=bootstrap.kubeconfig,
            cluster_identifier=cluster_identifier,
            wait_for=tuple(wait_for),
        )

    @classmethod
    def for_existing_cluster(
        cls,
        kubeconfig: pulumi.Input[str],
        *,
        cluster_identifier: str,
        context: str | None = None,
    ) -> ClusterAccessArgs:
        """Access to a cluster that already exists, by a kubeconfig kept as a stack secret."""
        return cls(kubeconfig=kubeconfig, cluster_identifier=cluster_identifier, context=context)


class ClusterAccess(pulumi.ComponentResource):
    """Holds the Kubernetes provider; pass `provider` to every Kubernetes resource."""

    provider: k8s.Provider
    """The explicit provider: `pulumi.ResourceOptions(provider=access.provider)`."""
    kubeconfig: pulumi.Output[str]
    """The kubeconfig the provider uses, secret."""

    def __init__(
        self,
        name: str,
        args: ClusterAccessArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpucluster:kubernetes:ClusterAccess", name, None, opts)
        self.kubeconfig = pulumi.Output.secret(args.kubeconfig)
        self.provider = k8s.Provider(
            f"{name}-provider",
            kubeconfig=self.kubeconfig,
            context=args.context,
            cluster_identifier=args.cluster_identifier,
            enable_server_side_apply=True,
            delete_unreachable=False,
            opts=pulumi.ResourceOptions(
                parent=self,
                # Bootstrap mode: the API server must answer before the provider's first call.
                depends_on=list(args.wait_for),
            ),
        )
        self.register_outputs({"kubeconfig": self.kubeconfig})
