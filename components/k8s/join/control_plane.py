"""ControlPlaneJoinSecrets: what a joining control-plane node fetches, written by the stack.

Issue 40, item 5: no long-lived key in a joining control-plane node's user-data. Instead, through
the cluster's API and before (or while) that node boots, the stack applies:

- the control-plane join token's Secret `kube-system/bootstrap-token-<id>` (the format in
  `token.py`), valid `CONTROL_PLANE_JOIN_TTL_HOURS` (two hours, kubeadm's own for
  `kubeadm-certs`), in kubeadm's node group (so kubeadm's bootstrap RBAC lets it join: discovery,
  the kubeadm-config ConfigMap, the kubelet's CSR) and in `CONTROL_PLANE_JOIN_GROUP`;
- `kube-system/kubeadm-certs`, the shared PKI in kubeadm's format under the certificate key
  (`kubeadm_certs.py`), which `kubeadm join --control-plane` downloads itself;
- `kube-system/gpucluster-encryption-config`, the API server's EncryptionConfiguration sealed
  with the same key (node_bootstrap/control_plane_join.py), which the bootstrap script fetches;
- a Role and RoleBinding letting `CONTROL_PLANE_JOIN_GROUP`, and only it, `get` those two Secrets.
  kubeadm's own `--upload-certs` binds its `kubeadm:kubeadm-certs` Role to every bootstrap token
  (copycerts.go, `createRBAC`: `NodeBootstrapTokenAuthGroup`); here a worker's token reads neither.

Both Secrets carry a controller reference to the token's Secret, as kubeadm's `getSecretOwnerRef`
sets it: when the token expires, kube-controller-manager's tokencleaner deletes the token's
Secret and the garbage collector the two Secrets with it. A node that boots later than that
fails its join until a `pulumi up` writes them again; the first run after one hour issues a new
token and certificate key (`JoinTokenRotation`), so the Secrets are re-applied under the new ones
(an update: a server-side apply, which creates an object that is gone) and user-data of VMs
created from then on carries the new pair. Existing VMs ignore user-data changes (node pools).

Applied through a provider of its own like the join token (`token.py`): the same wait
(`ApiServerReady`), the same `deleted_with` (the init VM) and the same adoption of an object a
previous run left behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1 import Secret
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs, OwnerReferenceArgs
from pulumi_kubernetes.rbac.v1 import PolicyRuleArgs, Role, RoleBinding, RoleRefArgs, SubjectArgs

from components.k8s.bootstrap import ClusterBootstrap
from components.k8s.join import kubeadm_certs
from components.k8s.join.material import ControlPlaneJoinMaterial
from components.k8s.join.token import (
    NODE_BOOTSTRAP_GROUP,
    PATCH_FORCE_ANNOTATION,
    SECRET_NAMESPACE,
    SECRET_TYPE,
    encoded,
    secret_name,
    token_secret_data,
)
from components.k8s.node_bootstrap import ClusterPki, ClusterSpec
from components.k8s.node_bootstrap.control_plane_join import (
    CONTROL_PLANE_JOIN_GROUP,
    ENCRYPTION_CONFIG_SECRET,
    seal,
)
from components.k8s.node_bootstrap.user_data import render_encryption_configuration

READER_ROLE = "gpucluster:control-plane-join"
DESCRIPTION = "joins control-plane nodes; owns kubeadm-certs and the sealed encryption keys (vsphere-gpu-cluster)"


def control_plane_token_data(*, token_id: str, token_secret: str, expires_at: str) -> dict[str, str]:
    data = token_secret_data(
        token_id=token_id, token_secret=token_secret, expires_at=expires_at, description=DESCRIPTION
    )
    data["auth-extra-groups"] = f"{NODE_BOOTSTRAP_GROUP},{CONTROL_PLANE_JOIN_GROUP}"
    return data


def kubeadm_certs_files(pki: ClusterPki) -> dict[str, str]:
    """The PKI by kubeadm-certs entry name (`kubeadm_certs.SECRET_ENTRY_NAMES`)."""
    return {
        "ca.crt": pki.ca_cert_pem,
        "ca.key": pki.ca_key_pem,
        "front-proxy-ca.crt": pki.front_proxy_ca_cert_pem,
        "front-proxy-ca.key": pki.front_proxy_ca_key_pem,
        "sa.pub": pki.service_account_pub_pem,
        "sa.key": pki.service_account_key_pem,
        "etcd-ca.crt": pki.etcd_ca_cert_pem,
        "etcd-ca.key": pki.etcd_ca_key_pem,
    }


def sealed_encryption_config_data(spec: ClusterSpec, pki: ClusterPki, certificate_key: str) -> dict[str, str]:
    """The encryption Secret's data as the API stores it (base64 of each sealed entry)."""
    plaintext = render_encryption_configuration(spec, pki).encode()
    return encoded(seal(plaintext, certificate_key))


@dataclass(frozen=True, kw_only=True)
class ControlPlaneJoinSecretsArgs:
    kubeconfig: pulumi.Input[str]
    """The cluster's admin kubeconfig (secret). Required."""
    spec: ClusterSpec
    """The cluster (its encryption key names). Required."""
    material: ControlPlaneJoinMaterial
    """`ClusterBootstrap.control_plane_join`. Required."""
    wait_for: Sequence[pulumi.Resource] = ()
    """What the applies wait for: `ApiServerReady`, as for the join token."""
    deleted_with: pulumi.Resource | None = None
    """The init VM, as for the join token (`JoinTokenArgs.deleted_with`)."""

    @classmethod
    def for_bootstrap(
        cls,
        bootstrap: ClusterBootstrap,
        spec: ClusterSpec,
        kubeconfig: pulumi.Input[str],
        wait_for: Sequence[pulumi.Resource],
        deleted_with: pulumi.Resource | None = None,
    ) -> ControlPlaneJoinSecretsArgs | None:
        """None with a single control-plane node: nothing joins it as a control-plane node."""
        if bootstrap.control_plane_join is None:
            return None
        return cls(
            kubeconfig=kubeconfig,
            spec=spec,
            material=bootstrap.control_plane_join,
            wait_for=tuple(wait_for),
            deleted_with=deleted_with,
        )


class ControlPlaneJoinSecrets(pulumi.ComponentResource):
    """The control-plane join token and the two Secrets it owns (module docstring)."""

    token_secret_name: pulumi.Output[str]

    def __init__(
        self, name: str, args: ControlPlaneJoinSecretsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpucluster:kubernetes:ControlPlaneJoinSecrets", name, None, opts)
        material = args.material
        provider = k8s.Provider(
            f"{name}-provider",
            kubeconfig=pulumi.Output.secret(args.kubeconfig),
            enable_server_side_apply=True,
            upsert_existing_objects=True,
            delete_unreachable=False,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.wait_for)),
        )
        applied = pulumi.ResourceOptions(parent=self, provider=provider, deleted_with=args.deleted_with)
        self.token_secret_name = material.token_id.apply(secret_name)
        token_data: pulumi.Output[dict[str, str]] = pulumi.Output.secret(
            pulumi.Output.all(material.token_id, material.token_secret, material.expires_at).apply(
                lambda v: encoded(control_plane_token_data(token_id=v[0], token_secret=v[1], expires_at=v[2]))
            )
        )
        token = Secret(
            f"{name}-token",
            metadata=ObjectMetaArgs(
                name=self.token_secret_name,
                namespace=SECRET_NAMESPACE,
                annotations={PATCH_FORCE_ANNOTATION: "true"},
            ),
            type=SECRET_TYPE,
            data=token_data,
            opts=applied,
        )
        # getSecretOwnerRef: a controller reference to the token's Secret, by its uid.
        owner = pulumi.Output.all(self.token_secret_name, token.metadata).apply(_owner_reference)
        certs_data: pulumi.Output[dict[str, str]] = pulumi.Output.secret(
            pulumi.Output.all(material.pki, material.certificate_key).apply(
                lambda v: kubeadm_certs.encrypted_secret_data(kubeadm_certs_files(v[0]), v[1])
            )
        )
        encryption_data: pulumi.Output[dict[str, str]] = pulumi.Output.secret(
            pulumi.Output.all(material.pki, material.certificate_key).apply(
                lambda v: sealed_encryption_config_data(args.spec, v[0], v[1])
            )
        )
        for child_name, secret_name_, data in (
            (f"{name}-kubeadm-certs", kubeadm_certs.KUBEADM_CERTS_SECRET, certs_data),
            (f"{name}-encryption-config", ENCRYPTION_CONFIG_SECRET, encryption_data),
        ):
            Secret(
                child_name,
                metadata=ObjectMetaArgs(
                    name=secret_name_,
                    namespace=SECRET_NAMESPACE,
                    owner_references=[owner],
                    # A previous upload (ours or kubeadm's) may own these fields.
                    annotations={PATCH_FORCE_ANNOTATION: "true"},
                ),
                type="Opaque",
                data=data,
                opts=applied,
            )
        role = Role(
            f"{name}-reader",
            metadata=ObjectMetaArgs(name=READER_ROLE, namespace=SECRET_NAMESPACE),
            rules=[
                PolicyRuleArgs(
                    api_groups=[""],
                    resources=["secrets"],
                    verbs=["get"],
                    resource_names=[kubeadm_certs.KUBEADM_CERTS_SECRET, ENCRYPTION_CONFIG_SECRET],
                )
            ],
            opts=applied,
        )
        RoleBinding(
            f"{name}-reader",
            metadata=ObjectMetaArgs(name=READER_ROLE, namespace=SECRET_NAMESPACE),
            role_ref=RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=READER_ROLE),
            subjects=[SubjectArgs(kind="Group", name=CONTROL_PLANE_JOIN_GROUP, api_group="rbac.authorization.k8s.io")],
            opts=pulumi.ResourceOptions.merge(applied, pulumi.ResourceOptions(depends_on=[role])),
        )
        self.register_outputs({"tokenSecretName": self.token_secret_name})


def _owner_reference(values: list[Any]) -> OwnerReferenceArgs:
    name, metadata = values
    uid = metadata.get("uid") if isinstance(metadata, dict) else getattr(metadata, "uid", None)
    ref = kubeadm_certs.owner_reference(name, str(uid or ""))
    return OwnerReferenceArgs(
        api_version=str(ref["apiVersion"]),
        kind=str(ref["kind"]),
        name=str(ref["name"]),
        uid=str(ref["uid"]),
        controller=True,
        block_owner_deletion=True,
    )
