"""The joining control-plane nodes' short-lived credentials, and the token machinery they share
with the cluster's join token (`ClusterBootstrap` issues both; issue 40 item 5).

A control-plane node other than the first gets, in its user-data, a control-plane join token and
a certificate key, renewed together: both carry the issue time of their own `JoinTokenRotation`
as keeper. What the stack writes into the cluster for them is `control_plane.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_random as random

from components.k8s.join.rotation import JoinTokenRotation, JoinTokenRotationArgs
from components.k8s.node_bootstrap import ClusterPki, bootstrap_token
from components.k8s.node_bootstrap.control_plane_join import ControlPlaneJoin

CONTROL_PLANE_JOIN_TTL_HOURS = 2
"""Lifetime of the control-plane join token and so of the Secrets it owns: kubeadm's own for its
`kubeadm-certs` upload (`DefaultCertTokenDuration`). Renewed by the first `pulumi up` after one
hour (`JoinTokenRotation`), so a control-plane VM created by any run has at least an hour to join."""


def _secret(value: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.secret(value)


def rotated_token(
    parent: pulumi.Resource, prefix: str, ttl_hours: int
) -> tuple[JoinTokenRotation, random.RandomString, random.RandomPassword, pulumi.Output[str]]:
    """A bootstrap token whose halves are renewed with `JoinTokenRotation` (`<prefix>-rotation`,
    `-id`, `-secret`)."""
    child = pulumi.ResourceOptions(parent=parent)
    rotation = JoinTokenRotation(f"{prefix}-rotation", JoinTokenRotationArgs(ttl_hours=ttl_hours), opts=child)
    # A new issue time replaces both halves: a new id (so a new Secret) and a new secret.
    keepers = {"issuedAt": rotation.issued_at}
    token_id = random.RandomString(
        f"{prefix}-id", keepers=keepers, length=6, upper=False, lower=True, numeric=True, special=False, opts=child
    )
    token_secret = random.RandomPassword(
        f"{prefix}-secret", keepers=keepers, length=16, upper=False, lower=True, numeric=True, special=False, opts=child
    )
    token = _secret(
        pulumi.Output.all(token_id.result, token_secret.result).apply(lambda parts: bootstrap_token(parts[0], parts[1]))
    )
    return rotation, token_id, token_secret, token


@dataclass(frozen=True)
class ControlPlaneJoinMaterial:
    """The joining control-plane nodes' short-lived token and certificate key (both renewed
    together, `CONTROL_PLANE_JOIN_TTL_HOURS`), and the PKI the stack writes for them."""

    token_id: pulumi.Output[str]
    token_secret: pulumi.Output[str]
    expires_at: pulumi.Output[str]
    certificate_key: pulumi.Output[str]
    """64 hex digits, secret."""
    pki: pulumi.Output[ClusterPki]
    """Secret: what `ControlPlaneJoinSecrets` seals into the cluster."""
    user_data_view: pulumi.Output[ControlPlaneJoin]
    """What the nodes' user-data carries, secret."""

    @classmethod
    def issue(
        cls, parent: pulumi.Resource, name: str, ca_cert_pem: pulumi.Output[str], pki: pulumi.Output[ClusterPki]
    ) -> ControlPlaneJoinMaterial:
        rotation, token_id, token_secret, token = rotated_token(
            parent, f"{name}-cp-join-token", CONTROL_PLANE_JOIN_TTL_HOURS
        )
        # A fresh certificate key with every token: kubeadm's `CreateCertificateKey`, 32 random bytes.
        certificate_key = _secret(
            random.RandomBytes(
                f"{name}-cp-join-certificate-key",
                length=32,
                keepers={"issuedAt": rotation.issued_at},
                opts=pulumi.ResourceOptions(parent=parent),
            ).hex
        )
        view: pulumi.Output[ControlPlaneJoin] = pulumi.Output.secret(
            pulumi.Output.all(token, certificate_key, ca_cert_pem).apply(
                lambda v: ControlPlaneJoin(token=v[0], certificate_key=v[1], ca_cert_pem=v[2])
            )
        )
        return cls(
            token_id=token_id.result,
            token_secret=_secret(token_secret.result),
            expires_at=rotation.expires_at,
            certificate_key=certificate_key,
            pki=pki,
            user_data_view=view,
        )
