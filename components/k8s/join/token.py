"""JoinToken: the kubeadm join token as a Kubernetes Secret that the stack owns and keeps valid.

Why: `kubeadm init` registers the token from its InitConfiguration once, with a TTL (24 h in the
rendered documents), and kube-controller-manager's tokencleaner deletes the Secret when it
expires. First-boot data is read once per VM and ignored on later runs, so nothing would ever
register the token again: a worker added on day 3 would carry a token the cluster has forgotten.
Instead the stack declares the token's Secret itself, through the cluster's Kubernetes provider,
with an expiration the stack moves forward (`join_token_rotation.py`).

The Secret is what the bootstrap-token authenticator and the bootstrap signer read
(k8s.io/cluster-bootstrap/token/api/types.go):
- name `bootstrap-token-<token-id>` in `kube-system`, type `bootstrap.kubernetes.io/token`;
- `token-id`, `token-secret`: the two halves of `<id>.<secret>`;
- `expiration`: RFC 3339 UTC; the authenticator refuses the token after it and tokencleaner
  deletes the Secret;
- `usage-bootstrap-authentication: "true"`: `kubeadm join` authenticates with it (TLS bootstrap);
- `usage-bootstrap-signing: "true"`: the bootstrap signer signs the `kube-public/cluster-info`
  ConfigMap with it (`jws-kubeconfig-<id>`), which is how a joining node checks discovery before
  it checks the CA pin (`discovery.bootstrapToken.caCertHashes`, unchanged: it pins the CA, not
  the token);
- `auth-extra-groups: system:bootstrappers:kubeadm:default-node-token`: the group kubeadm's
  bootstrap RBAC names. `kubeadm init` (phase bootstrap-token) binds that GROUP, not a token, to
  CSR creation (`kubeadm:kubelet-bootstrap`), CSR auto-approval
  (`kubeadm:node-autoapprove-bootstrap`) and reading nodes (`kubeadm:get-nodes`), so the
  bindings keep working for every later token in the group.

Taking over kubeadm's Secret: on the first run kubeadm's copy of the same token already exists.
pulumi-kubernetes (4.29+) creates a new resource client-side even in server-side-apply mode, so a
create of an existing object fails with AlreadyExists unless the provider sets
`upsertExistingObjects`; the token therefore goes through a provider of its own with that option
(the cluster's provider keeps refusing to adopt objects it did not create). kubeadm wrote its copy
with an update, so it owns `expiration` and `description`, whose values we change: the annotation
`pulumi.com/patchForce: "true"` forces the apply, so the stack becomes the owner of those fields
(pulumi-kubernetes, "Managing Resources with Server-Side Apply"). The apply waits for
`ApiServerReady`, which waits until `kubeadm init` has finished (its addon phase runs after the
bootstrap-token phase), so kubeadm cannot write its copy over ours afterwards. Nothing
else manages the Secret afterwards. A rotation gives a new token id and so a new Secret name: a
replacement, created before the old Secret is deleted (a Secret already removed by tokencleaner
counts as deleted).

Security: the token is a standing credential for joining nodes as long as it is valid. Anyone
holding it can register a node (and get a kubelet certificate for that node's name), not more.
It lives encrypted in the stack state and in user-data (guestinfo is wiped after first boot).
A shorter TTL narrows the window, a longer one lets rarely run stacks keep a token; either way the
stack renews it when half of it is gone. `pulumi up --replace <token-secret urn>` rotates it at
once.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

# Loaded with this module, not lazily on first use inside the program (components/k8s/objects.py).
from pulumi_kubernetes.core.v1 import Secret
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

from components.k8s.bootstrap import ClusterBootstrap

SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_NAMESPACE = "kube-system"
SECRET_NAME_PREFIX = "bootstrap-token-"
NODE_BOOTSTRAP_GROUP = "system:bootstrappers:kubeadm:default-node-token"
"""kubeadm's `NodeBootstrapTokenAuthGroup`: the group its bootstrap RBAC bindings name."""
PATCH_FORCE_ANNOTATION = "pulumi.com/patchForce"
DEFAULT_DESCRIPTION = "joins nodes to the cluster; kept valid and rotated by the vsphere-gpu-cluster stack"


def secret_name(token_id: str) -> str:
    return f"{SECRET_NAME_PREFIX}{token_id}"


def token_secret_data(*, token_id: str, token_secret: str, expires_at: str, description: str) -> dict[str, str]:
    """The Secret's data, unencoded (see the module docstring for each key)."""
    return {
        "token-id": token_id,
        "token-secret": token_secret,
        "expiration": expires_at,
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
        "auth-extra-groups": NODE_BOOTSTRAP_GROUP,
        "description": description,
    }


def encoded(data: Mapping[str, str]) -> dict[str, str]:
    """`data` as the API stores it (base64). Written as `data`, not `stringData`: `stringData`
    is write-only and never read back, which would leave the provider an input it cannot
    compare with the live object."""
    return {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}


@dataclass(frozen=True, kw_only=True)
class JoinTokenArgs:
    kubeconfig: pulumi.Input[str]
    """The cluster's admin kubeconfig (`ClusterAccess.kubeconfig`, secret). Required: the token's
    own provider (module docstring) uses it."""
    wait_for: Sequence[pulumi.Resource] = ()
    """What the apply waits for: `ApiServerReady` in bootstrap mode (the credentials are authorised
    and `kubeadm init` has finished). Default none. Not the control-plane VMs: during a rolling
    replacement of the control plane a new member joins with the token of this run, which must
    reach the cluster before the next member's VM is replaced (that VM waits for the new member)."""
    deleted_with: pulumi.Resource | None = None
    """The first control-plane VM in bootstrap mode: the Secret lives in the cluster and goes with
    it, so `pulumi destroy` does not call the API for it (which, with the other members already
    gone, would have no etcd quorum to answer), and it is re-applied (adopted) when that VM is
    replaced. Default none (an existing cluster's Secret is deleted through the API)."""
    token_id: pulumi.Input[str]
    """The public half of the token (`ClusterBootstrap.join_token_id`). Required."""
    token_secret: pulumi.Input[str]
    """The secret half (`ClusterBootstrap.join_token_secret`). Required; made a secret whatever
    is passed."""
    expires_at: pulumi.Input[str]
    """RFC 3339 expiry (`ClusterBootstrap.join_token_expires_at`). Required."""
    description: str = DEFAULT_DESCRIPTION
    """Human-readable `description` key. Default says the stack owns the token."""

    @classmethod
    def for_bootstrap(
        cls,
        bootstrap: ClusterBootstrap,
        kubeconfig: pulumi.Input[str],
        wait_for: Sequence[pulumi.Resource],
        deleted_with: pulumi.Resource | None = None,
    ) -> JoinTokenArgs:
        """The token `bootstrap` renders into the nodes' user-data, applied after `wait_for`."""
        return cls(
            kubeconfig=kubeconfig,
            wait_for=tuple(wait_for),
            deleted_with=deleted_with,
            token_id=bootstrap.join_token_id,
            token_secret=bootstrap.join_token_secret,
            expires_at=bootstrap.join_token_expires_at,
        )


class JoinToken(pulumi.ComponentResource):
    """The `kube-system/bootstrap-token-<id>` Secret of the cluster's current join token."""

    secret_name: pulumi.Output[str]
    """`bootstrap-token-<id>` (public: the id is the token's public half)."""
    expires_at: pulumi.Output[str]
    """When the current token stops authenticating, unless a `pulumi up` renewed it earlier."""

    def __init__(self, name: str, args: JoinTokenArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:JoinToken", name, None, opts)
        provider = k8s.Provider(
            f"{name}-provider",
            kubeconfig=pulumi.Output.secret(args.kubeconfig),
            enable_server_side_apply=True,
            # kubeadm init created this Secret already: adopt it instead of failing AlreadyExists.
            upsert_existing_objects=True,
            delete_unreachable=False,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.wait_for)),
        )
        plain: pulumi.Output[dict[str, str]] = pulumi.Output.all(
            args.token_id, args.token_secret, args.expires_at
        ).apply(
            lambda v: encoded(
                token_secret_data(token_id=v[0], token_secret=v[1], expires_at=v[2], description=args.description)
            )
        )
        data: pulumi.Output[dict[str, str]] = pulumi.Output.secret(plain)
        self.secret_name = pulumi.Output.from_input(args.token_id).apply(secret_name)
        self.expires_at = pulumi.Output.from_input(args.expires_at)
        Secret(
            f"{name}-secret",
            metadata=ObjectMetaArgs(
                name=self.secret_name,
                namespace=SECRET_NAMESPACE,
                # kubeadm init created this very Secret and owns fields we change: force the
                # server-side apply so the stack takes them over (module docstring).
                annotations={PATCH_FORCE_ANNOTATION: "true"},
            ),
            type=SECRET_TYPE,
            data=data,
            opts=pulumi.ResourceOptions(parent=self, provider=provider, deleted_with=args.deleted_with),
        )
        self.register_outputs({"secretName": self.secret_name, "expiresAt": self.expires_at})
