"""ClusterBootstrap: everything a kubeadm cluster needs before its VMs exist.

Pulumi generates the trust material itself, then renders each node's cloud-init user-data:

- the cluster CA, front-proxy CA and etcd CA (pulumi-tls `PrivateKey` + `SelfSignedCert`,
  RSA-2048 like kubeadm's own, 10 years) and the service-account signing key. No node's
  user-data carries them (issue 40 item 5). The first control-plane node receives them sealed to
  a key it makes itself (`init_pki_bundle`, delivered by `InitPkiDelivery`:
  node_bootstrap/pki_handoff.py) and `kubeadm init` uses them instead of making its own (kubeadm's
  "external CA files present" path). The other control-plane nodes get a control-plane join token
  of two hours and a fresh certificate key (`ControlPlaneJoinMaterial`), with which they download
  the keys from Secrets the stack writes (components/k8s/join/control_plane.py,
  `node_bootstrap/kubeadm.py`);
- an admin client certificate (`CN=kubernetes-admin`, `O=kubeadm:cluster-admins`, 1 year,
  renewed by `pulumi up` within 30 days of expiry) signed by that CA, so Pulumi holds a working
  admin kubeconfig with no copy step;
- an etcd client certificate (`CN=gpucluster-etcd-member-guard`, client auth only, the admin
  certificate's lifetime and renewal) signed by the etcd CA, with which `ControlPlaneMember`
  removes a departing control-plane node's etcd member (kubeadm's etcd runs with
  `--client-cert-auth=true` and trusts exactly that CA; with etcd's own auth off, as kubeadm leaves
  it, any certificate from the CA may change membership);
- a kubeadm bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`: a `RandomString` id, which is public
  anyway as the name of its Secret, and a `RandomPassword` secret, which pulumi-random keeps
  encrypted in state); workers join with it and authenticate the API server by
  `discovery.bootstrapToken.caCertHashes`. Both halves carry the issue time of a
  `JoinTokenRotation` as their keeper: the token has a lifetime (`join_token_ttl_hours`) and the
  first `pulumi up` after half of it passed issues a new one (`join_token_rotation.py`). The
  cluster learns each token from the `JoinToken` Secret the stack applies once the API server
  authorises it (`join_token.py`), not only from `kubeadm init`, so nodes added any time later
  can join.

The discovery hash is kubeadm's RFC 7469 pin, SHA-256 over the CA certificate's DER
SubjectPublicKeyInfo. pulumi-tls's `public_key_pem` of the CA key is exactly that DER in PEM armour
(Go's `MarshalPKIXPublicKey`, the same encoding `x509.CreateCertificate` embeds), so hashing its
base64 body gives the pin without an X.509 library; the tests check it against openssl's
`x509 -pubkey | sha256` pipeline that kubeadm's documentation gives.

Needs only plain config (names, addresses), never VM outputs: the node pools take `user_data`
from here. Every secret (keys, token, user-data, kubeconfig) is a secret Output end to end.
Changing the CA's inputs replaces the CA and breaks a running cluster's trust: the CA settings are
fixed once the cluster exists.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_random as random
import pulumi_tls as tls

from components.k8s.join.material import ControlPlaneJoinMaterial, rotated_token
from components.k8s.join.rotation import validate_ttl_hours
from components.k8s.kubeconfig import ADMIN_GROUP, ADMIN_USER, api_server_url, render_kubeconfig
from components.k8s.node_bootstrap import (
    ClusterPki,
    ClusterSpec,
    UserDataRenderer,
    spki_sha256,
)
from components.k8s.node_bootstrap.pki_handoff import pki_bundle

ETCD_CLIENT_NAME = "gpucluster-etcd-member-guard"
CA_USES = ["cert_signing", "crl_signing", "digital_signature", "key_encipherment"]


@dataclass(frozen=True, kw_only=True)
class ClusterBootstrapArgs(ClusterSpec):
    """The cluster (see `ClusterSpec` for every field and its default) plus certificate and join
    token lifetimes."""

    ca_validity_hours: int = 87600
    """Lifetime of the three CAs. Default 87600 (10 years, kubeadm's CA default). Never renewed
    automatically: a new CA means re-keying every node, so shorter buys little and costs a
    cluster rebuild when it runs out. Must exceed `admin_cert_validity_hours`."""
    admin_cert_validity_hours: int = 8760
    """Lifetime of the admin client certificate in the kubeconfig. Default 8760 (1 year).
    Shorter limits a leaked kubeconfig's use but needs `pulumi up` (which re-issues it) more
    often; a re-issue also replaces `ApiServerReady`, which then checks the new certificate."""
    admin_cert_early_renewal_hours: int = 720
    """`pulumi up` re-issues the admin certificate (and so the kubeconfig) this long before it
    expires. Default 720 (30 days): a stack run at least monthly never holds an expired one;
    larger re-issues sooner (more kubeconfig changes to fetch)."""
    join_token_ttl_hours: int = 24
    """Lifetime of each join token in the cluster (the `expiration` of its Secret). Default 24
    (kubeadm's own default); 2 to 87600 here, at most 24 from a stack file (the token sits in
    vCenter's events of every VM created with it). The first `pulumi up` after half of it passed issues a new token, so a
    node created by any run has at least half of it to join. Shorter: a leaked token is useful for
    less time, but a stack not run for a while rotates on its next run (harmless: only new nodes
    use the token). Longer: fewer rotations, a longer window for a leaked token. kubeadm's own
    `bootstrap_token_ttl` only covers the minutes until the stack's Secret takes the token over."""

    def validation_errors(self) -> list[str]:
        errors = super().validation_errors()
        if self.ca_validity_hours <= self.admin_cert_validity_hours:
            errors.append(
                f"ca_validity_hours ({self.ca_validity_hours}) must exceed "
                f"admin_cert_validity_hours ({self.admin_cert_validity_hours})"
            )
        if not 0 <= self.admin_cert_early_renewal_hours < self.admin_cert_validity_hours:
            errors.append("admin_cert_early_renewal_hours must be between 0 and admin_cert_validity_hours")
        errors.extend(validate_ttl_hours(self.join_token_ttl_hours))
        return errors


def _secret(value: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.secret(value)


class _CertificateAuthority:
    """A CA key and its self-signed certificate, children of the bootstrap component."""

    def __init__(self, parent: pulumi.Resource, name: str, common_name: str, validity_hours: int) -> None:
        opts = pulumi.ResourceOptions(parent=parent)
        key = tls.PrivateKey(f"{name}-key", algorithm="RSA", rsa_bits=2048, opts=opts)
        cert = tls.SelfSignedCert(
            name,
            private_key_pem=_secret(key.private_key_pem),
            subject=tls.SelfSignedCertSubjectArgs(common_name=common_name),
            is_ca_certificate=True,
            set_subject_key_id=True,
            allowed_uses=CA_USES,
            validity_period_hours=validity_hours,
            opts=opts,
        )
        self.key = key
        self.cert = cert
        self.key_pem: pulumi.Output[str] = _secret(key.private_key_pem)
        self.cert_pem: pulumi.Output[str] = cert.cert_pem


def _client_certificate(
    parent: pulumi.Resource,
    prefix: str,
    ca: _CertificateAuthority,
    args: ClusterBootstrapArgs,
    *,
    common_name: str,
    organization: str | None = None,
) -> tuple[tls.PrivateKey, tls.LocallySignedCert]:
    """A client key and certificate signed by `ca` (`<prefix>-key`, `-csr`, `-cert`), with the admin
    certificate's lifetime and renewal."""
    child = pulumi.ResourceOptions(parent=parent)
    key = tls.PrivateKey(f"{prefix}-key", algorithm="RSA", rsa_bits=2048, opts=child)
    csr = tls.CertRequest(
        f"{prefix}-csr",
        private_key_pem=_secret(key.private_key_pem),
        subject=tls.CertRequestSubjectArgs(common_name=common_name, organization=organization),
        opts=child,
    )
    cert = tls.LocallySignedCert(
        f"{prefix}-cert",
        cert_request_pem=csr.cert_request_pem,
        ca_private_key_pem=ca.key_pem,
        ca_cert_pem=ca.cert_pem,
        allowed_uses=["digital_signature", "key_encipherment", "client_auth"],
        validity_period_hours=args.admin_cert_validity_hours,
        early_renewal_hours=args.admin_cert_early_renewal_hours,
        opts=child,
    )
    return key, cert


class ClusterBootstrap(pulumi.ComponentResource):
    """Cluster PKI, join token, per-node cloud-init user-data and the admin kubeconfig."""

    kubeconfig: pulumi.Output[str]
    """Admin kubeconfig (client certificate, inline CA), secret."""
    ca_certificate_pem: pulumi.Output[str]
    """The cluster CA certificate (public): what clients trust for the API server."""
    discovery_token_ca_cert_hash: pulumi.Output[str]
    """`sha256:<hex>` pin of the cluster CA, for `kubeadm join --discovery-token-ca-cert-hash`."""
    user_data: dict[str, pulumi.Output[str]]
    """`#cloud-config` user-data keyed by node name, secret (holds a token; no key). Feed it to
    `guestinfo.userdata` of that node's VM."""
    init_node_name: str
    """The control-plane node that runs `kubeadm init` (the first one)."""
    init_pki_bundle: pulumi.Output[str]
    """Base64 of the init node's keys (`pki_handoff.pki_bundle`), secret: what `InitPkiDelivery`
    seals to the key that node makes."""
    init_pki_signing_key_pem: pulumi.Output[str]
    """The ECDSA P-256 key `InitPkiDelivery` signs the sealed keys with, secret; the init node's
    user-data carries its public half."""
    api_server_url: pulumi.Output[str]
    """`https://<control_plane_endpoint>:<api_server_port>`."""
    api_server_host: str
    """The control-plane endpoint's host, for readiness checks."""
    api_server_port: int
    """The control-plane endpoint's port."""
    admin_client_certificate_pem: pulumi.Output[str]
    """The admin client certificate (`O=kubeadm:cluster-admins`), for the readiness check."""
    admin_client_key_pem: pulumi.Output[str]
    """Its private key, secret."""
    etcd_ca_certificate_pem: pulumi.Output[str]
    """The etcd CA certificate (public): what etcd clients trust for the members' endpoints."""
    etcd_client_certificate_pem: pulumi.Output[str]
    """A client certificate signed by the etcd CA, for `ControlPlaneMember`; secret (together with
    its key it can change etcd's membership)."""
    etcd_client_key_pem: pulumi.Output[str]
    """Its private key, secret."""
    join_token_id: pulumi.Output[str]
    """The join token's public half: its Secret is `kube-system/bootstrap-token-<id>`."""
    join_token_secret: pulumi.Output[str]
    """The join token's secret half, secret."""
    join_token_expires_at: pulumi.Output[str]
    """RFC 3339 expiry of the current join token (the Secret's `expiration`)."""
    control_plane_join: ControlPlaneJoinMaterial | None
    """With more than one control-plane node: the short-lived token and certificate key of the
    joining control-plane nodes, and what the stack writes for them (`ControlPlaneJoinSecrets`)."""

    def __init__(
        self,
        name: str,
        args: ClusterBootstrapArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpucluster:kubernetes:ClusterBootstrap", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec: ClusterSpec = args

        cluster_ca = _CertificateAuthority(self, f"{name}-ca", "kubernetes", args.ca_validity_hours)
        front_proxy_ca = _CertificateAuthority(self, f"{name}-front-proxy-ca", "front-proxy-ca", args.ca_validity_hours)
        etcd_ca = _CertificateAuthority(self, f"{name}-etcd-ca", "etcd-ca", args.ca_validity_hours)
        service_account_key = tls.PrivateKey(f"{name}-sa-key", algorithm="RSA", rsa_bits=2048, opts=child)
        # Signs the init node's sealed keys (InitPkiDelivery); its public half is in that node's
        # user-data, so the node opens no envelope someone else wrote to its guestinfo (issue 53).
        # ECDSA P-256: FIPS-approved, and `openssl dgst -verify` checks it with the key in a file.
        handoff_signer = tls.PrivateKey(f"{name}-pki-handoff-signer", algorithm="ECDSA", ecdsa_curve="P256", opts=child)

        admin_key, admin_cert = _client_certificate(
            self, f"{name}-admin", cluster_ca, args, common_name=ADMIN_USER, organization=ADMIN_GROUP
        )
        etcd_client_key, etcd_client_cert = _client_certificate(
            self, f"{name}-etcd-client", etcd_ca, args, common_name=ETCD_CLIENT_NAME
        )

        rotation, token_id, token_secret, token = rotated_token(self, f"{name}-token", args.join_token_ttl_hours)

        # One RandomBytes per key name: a name added later gets a new key, a name kept keeps its
        # key, and a name removed drops its key (the rotation in node_bootstrap/api_server.py).
        encryption_keys = {
            key_name: random.RandomBytes(f"{name}-secrets-encryption-{key_name}", length=32, opts=child).base64
            for key_name in spec.secrets_encryption_key_names
        }
        ca_hash = cluster_ca.key.public_key_pem.apply(spki_sha256)
        pki: pulumi.Output[ClusterPki] = pulumi.Output.secret(
            pulumi.Output.all(
                pulumi.Output.all(**encryption_keys),
                cluster_ca.cert_pem,
                cluster_ca.key_pem,
                front_proxy_ca.cert_pem,
                front_proxy_ca.key_pem,
                etcd_ca.cert_pem,
                etcd_ca.key_pem,
                service_account_key.private_key_pem,
                service_account_key.public_key_pem,
            ).apply(_pki_from_pems)
        )

        # Gathered once, not per node, and secret: every document rendered from them is secret
        # too (apply keeps secretness). No node gets key material in its user-data: the init node
        # receives it sealed (init_pki_bundle), the other control-plane nodes a short-lived token
        # and a certificate key (issue 40, item 5); workers the token and the pin only.
        shared_inputs: pulumi.Output[list[Any]] = pulumi.Output.secret(
            pulumi.Output.all(token, ca_hash, handoff_signer.public_key_pem)
        )
        # One renderer for the init node and the workers, so what all of a role's nodes share is
        # rendered once (UserDataRenderer).
        renderer = shared_inputs.apply(_user_data_renderer(spec))
        user_data: dict[str, pulumi.Output[str]] = {}
        first, *joining = spec.control_plane_nodes
        user_data[first.name] = renderer.apply(_render_for(first.name))
        self.control_plane_join = None
        if joining:
            material = ControlPlaneJoinMaterial.issue(self, name, cluster_ca.cert_pem, pki)
            joining_inputs: pulumi.Output[list[Any]] = pulumi.Output.secret(
                pulumi.Output.all(token, ca_hash, material.user_data_view)
            )
            joining_renderer = joining_inputs.apply(_joining_renderer(spec))
            for node in joining:
                user_data[node.name] = joining_renderer.apply(_render_for(node.name))
            self.control_plane_join = material
        for node in spec.worker_nodes:
            user_data[node.name] = renderer.apply(_render_for(node.name))
        self.init_node_name = first.name
        self.init_pki_bundle = pulumi.Output.secret(
            pki.apply(lambda value: base64.b64encode(pki_bundle(spec, value)).decode())
        )
        self.init_pki_signing_key_pem = _secret(handoff_signer.private_key_pem)

        self.api_server_host = spec.control_plane_endpoint
        self.api_server_port = spec.api_server_port
        url = api_server_url(spec.control_plane_endpoint, spec.api_server_port)
        self.api_server_url = pulumi.Output.from_input(url)
        self.ca_certificate_pem = cluster_ca.cert_pem
        self.discovery_token_ca_cert_hash = ca_hash
        self.user_data = user_data
        self.admin_client_certificate_pem = admin_cert.cert_pem
        self.admin_client_key_pem = _secret(admin_key.private_key_pem)
        self.etcd_ca_certificate_pem = etcd_ca.cert_pem
        self.etcd_client_certificate_pem = _secret(etcd_client_cert.cert_pem)
        self.etcd_client_key_pem = _secret(etcd_client_key.private_key_pem)
        self.join_token_id = token_id.result
        self.join_token_secret = _secret(token_secret.result)
        self.join_token_expires_at = rotation.expires_at
        self.kubeconfig = _secret(
            pulumi.Output.all(cluster_ca.cert_pem, admin_cert.cert_pem, admin_key.private_key_pem).apply(
                lambda v: render_kubeconfig(
                    cluster_name=spec.cluster_name,
                    server=url,
                    ca_cert_pem=v[0],
                    client_cert_pem=v[1],
                    client_key_pem=v[2],
                )
            )
        )

        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "caCertificatePem": self.ca_certificate_pem,
                "discoveryTokenCaCertHash": self.discovery_token_ca_cert_hash,
                "apiServerUrl": self.api_server_url,
                "userData": self.user_data,
                "joinTokenId": self.join_token_id,
                "joinTokenExpiresAt": self.join_token_expires_at,
            }
        )


def _user_data_renderer(spec: ClusterSpec) -> Callable[[list[Any]], UserDataRenderer]:
    """A renderer of the init node's and the workers' user-data from `[token, ca_hash, the key
    hand-off signer's public key]`."""

    def renderer(values: list[Any]) -> UserDataRenderer:
        return UserDataRenderer(spec, token=values[0], ca_cert_hash=values[1], pki_handoff_signer_pem=values[2])

    return renderer


def _joining_renderer(spec: ClusterSpec) -> Callable[[list[Any]], UserDataRenderer]:
    """A renderer of the joining control-plane nodes' user-data from `[token, ca_hash, ControlPlaneJoin]`."""

    def renderer(values: list[Any]) -> UserDataRenderer:
        return UserDataRenderer(spec, token=values[0], ca_cert_hash=values[1], control_plane_join=values[2])

    return renderer


def _render_for(node_name: str) -> Callable[[UserDataRenderer], str]:
    return lambda renderer: renderer.render(node_name)


def _pki_from_pems(values: list[Any]) -> ClusterPki:
    """`[encryption keys by name, *PEMs in _PKI_FIELDS order]`."""
    keys, *pems = values
    return ClusterPki(**dict(zip(_PKI_FIELDS, pems, strict=True)), secrets_encryption_keys=dict(keys))


_PKI_FIELDS = (
    "ca_cert_pem",
    "ca_key_pem",
    "front_proxy_ca_cert_pem",
    "front_proxy_ca_key_pem",
    "etcd_ca_cert_pem",
    "etcd_ca_key_pem",
    "service_account_key_pem",
    "service_account_pub_pem",
)
