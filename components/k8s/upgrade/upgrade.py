"""ClusterUpgrade: a Kubernetes version change, on the cluster's side, around the rolling node change.

A `kubernetes.version` change rolls every node (the version is part of each node's rollout step,
`components.k8s.rollout.rollout`), control plane first. Two of these resources put the cluster-wide part
where Cluster API's KubeadmControlPlane controller puts it (`cluster_upgrade_steps` cites it):

- step `cluster-configuration` (`cluster-version`): every rollout gate depends on it, so its
  `update` runs before the first node is replaced: the stored ClusterConfiguration's
  `kubernetesVersion` is set, which the new control-plane nodes' `kubeadm join` reads. It refuses
  a downgrade or a skipped minor measured against the cluster itself. It also keeps the API
  server's hardening flags and volumes in that stored copy (`api_server`, issue 40 item 3:
  api_server_settings.py), and a change to them is a change of this step.
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

The same step keeps the stack's etcd image tag in the stored ClusterConfiguration
(`etcd.local.imageTag`, `components.k8s.version_policy`), so every new control-plane node joins with
it. A change of etcd line (3.5 -> 3.6 with Kubernetes 1.34, 3.6 -> 3.7 with 1.37) is refused by the
`cluster-configuration` step, before anything is written and before any node is replaced, while any
etcd member runs older than the line's floor (3.5.32, 3.6.11) or cannot say its version
(`components.k8s.etcd.versions` cites etcd's guides). The members are read through the etcd JSON
gateway with the stack's etcd client certificate (`etcd`); without it that step is refused too. A
cluster kubeadm built at 1.33 (etcd 3.5.24) passes by `pulumi up` alone: at 1.33 the step writes
the tag 3.5.32-0, which is part of the control-plane nodes' generation (stacks.wiring.rollout), so
they are replaced one by one and join with it; the change to 1.34 then finds every member at 3.5.32.

Otherwise only a version or etcd tag change updates either (`diff` looks at nothing else); a failed update
fails the `pulumi up` there, and the next run retries it (its state keeps the old version until it
worked).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pulumi

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.k8s.api.client import KubeApi, KubeconfigError
from components.k8s.etcd.gateway import CLIENT_PORT, EtcdGateway, Gateway, client_url
from components.k8s.etcd.versions import UPGRADE_FLOORS, new_line, read_member_versions, refusal_for
from components.k8s.upgrade.api_server_settings import set_api_server_settings
from components.k8s.upgrade.steps import (
    UpgradeError,
    cluster_initialised,
    kube_proxy_at,
    set_addon_versions,
    set_cluster_version,
)

UpgradeStep = Literal["cluster-configuration", "addons"]


GatewayFor = Callable[[dict[str, Any]], Gateway]
"""How the step reaches the etcd members: by default an `EtcdGateway` with the step's client
certificate; a test passes the gateway's answers instead."""


def _etcd_gateway(props: dict[str, Any]) -> Gateway:
    return EtcdGateway(str(props["etcd_ca_pem"]), str(props["etcd_client_cert_pem"]), str(props["etcd_client_key_pem"]))


class ClusterUpgradeProvider(handlers.ResourceHandlers):
    def __init__(self, gateway_for: GatewayFor = _etcd_gateway) -> None:
        self._gateway_for = gateway_for

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        # Day one: `applied: false` (no cluster answered), and the next run checks (module docstring).
        return handlers.CreateResult(id_=str(props["step"]), outs={**props, "applied": _catch_up(props, self._gateway_for)})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        # A new kubeconfig (a rotated client certificate) is no reason to run a step again; a step
        # created before the cluster answered (day one) is, and so are a new etcd tag and new API
        # server settings.
        changes = (
            any(olds.get(key) != news.get(key) for key in ("version", "etcd_image_tag", "api_server"))
            or olds.get("applied") is False
        )
        return handlers.DiffResult(changes=changes)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        if olds.get("version") == news.get("version") and olds.get("etcd_image_tag") == news.get("etcd_image_tag"):
            # the check a day-one create left, or new API server settings
            return handlers.UpdateResult(outs={**news, "applied": _catch_up(news, self._gateway_for)})
        _run(_api(news), news, self._gateway_for)
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


def etcd_check(props: dict[str, Any], gateway_for: GatewayFor = _etcd_gateway) -> Callable[[str, str], None]:
    """The check `set_cluster_version` runs before it writes a new etcd tag: on a change of etcd line
    (3.5 -> 3.6, 3.6 -> 3.7), every member's own version through the etcd gateway (module docstring)."""

    def check(current_tag: str, target_tag: str) -> None:
        line = new_line(current_tag, target_tag)
        if line is None:
            return
        floor = ".".join(map(str, UPGRADE_FLOORS.get(line, ())))
        version = props["version"]
        addresses = list(props.get("etcd_addresses") or [])
        if not addresses or not props.get("etcd_ca_pem"):
            raise UpgradeError(
                f"kubernetes.version {version}: etcd {current_tag} -> {target_tag} moves etcd to {line[0]}.{line[1]}, and "
                f"this step has no etcd access to check that every member runs {floor} or later first; nothing was "
                "changed"
            )
        gateway = gateway_for(props)
        port = int(props.get("etcd_client_port") or CLIENT_PORT)
        refusal = refusal_for(line, read_member_versions(gateway, [client_url(a, port) for a in addresses]))
        if refusal is not None:
            raise UpgradeError(f"kubernetes.version {version}: {refusal}; nothing was changed")

    return check


def _run(api: KubeApi, props: dict[str, Any], gateway_for: GatewayFor = _etcd_gateway) -> None:
    step, version = str(props["step"]), str(props["version"])
    if step == "cluster-configuration":
        tag = str(props.get("etcd_image_tag") or "") or None
        before = set_cluster_version(api, version, etcd_image_tag=tag, before_etcd_change=etcd_check(props, gateway_for))
        pulumi.log.info(
            f"kube-system/kubeadm-config: kubernetesVersion {before} -> v{version}"
            + (f", etcd.local.imageTag {tag}" if tag else "")
        )
        # After the version (which refuses first when it must), before any node is replaced: the
        # API server's hardening, which every control-plane join reads (api_server_settings.py).
        if props.get("api_server") and set_api_server_settings(api, props["api_server"]):
            pulumi.log.info("kube-system/kubeadm-config: the API server's admission, audit and encryption flags added")
    else:
        changed = set_addon_versions(api, version)
        pulumi.log.info(f"add-ons at Kubernetes {version}: {', '.join(changed) or 'already there'}")


def _catch_up(props: dict[str, Any], gateway_for: GatewayFor = _etcd_gateway) -> bool:
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
    _run(api, props, gateway_for)  # the cluster-configuration step changes nothing when already there
    return True


@dataclass(frozen=True, kw_only=True)
class EtcdAccess:
    """The control-plane nodes' etcd client endpoints and a client certificate for them."""

    addresses: Sequence[str]
    """The control-plane nodes' management addresses (etcd listens on `https://<address>:2379`)."""
    ca_pem: pulumi.Input[str]
    """The etcd CA certificate."""
    client_cert_pem: pulumi.Input[str]
    """A client certificate signed by the etcd CA (`ClusterBootstrap.etcd_client_certificate_pem`)."""
    client_key_pem: pulumi.Input[str]
    """Its key (a secret; encrypted in state)."""
    client_port: int = CLIENT_PORT
    """etcd's client port. Default 2379 (kubeadm's); only a test has reason to change it."""


@dataclass(frozen=True, kw_only=True)
class ClusterUpgradeArgs:
    step: UpgradeStep
    """`cluster-configuration` (before any node is replaced) or `addons` (after the control plane)."""
    version: str
    """The stack's Kubernetes version (`kubernetes.version`), e.g. "1.35.0"."""
    kubeconfig: pulumi.Input[str]
    """Admin kubeconfig (a secret; encrypted in state); must not depend on the node VMs."""
    etcd: EtcdAccess | None = None
    """How the `cluster-configuration` step reads the etcd members' versions (module docstring).
    Default None: a change onto a new etcd line is refused, as its members cannot be checked."""
    etcd_image_tag: str | None = None
    """The etcd tag the `cluster-configuration` step keeps in the stored ClusterConfiguration
    (`etcd.local.imageTag`), e.g. "3.6.13-0" (`components.k8s.version_policy`). Default None: left as
    stored (kubeadm's pin for the minor)."""
    api_server: Mapping[str, Any] | None = None
    """The `apiServer.extraArgs`/`extraVolumes` the `cluster-configuration` step keeps in the stored
    ClusterConfiguration (api_server_settings.py). Default None: left as stored."""


class ClusterUpgrade(GpuclusterResource, module="kubernetes", name="ClusterUpgrade"):
    """One cluster-wide step of a version upgrade (see the module docstring)."""

    def __init__(self, name: str, args: ClusterUpgradeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs: dict[str, Any] = {
            "step": args.step,
            "version": args.version,
            "kubeconfig": pulumi.Output.secret(args.kubeconfig),
        }
        if args.etcd_image_tag:
            inputs["etcd_image_tag"] = args.etcd_image_tag
        if args.api_server is not None:
            inputs["api_server"] = dict(args.api_server)
        if args.etcd is not None:
            inputs |= {
                "etcd_addresses": list(args.etcd.addresses),
                "etcd_client_port": args.etcd.client_port,
                "etcd_ca_pem": args.etcd.ca_pem,
                "etcd_client_cert_pem": pulumi.Output.secret(args.etcd.client_cert_pem),
                "etcd_client_key_pem": pulumi.Output.secret(args.etcd.client_key_pem),
            }
        super().__init__(name, inputs, opts)
