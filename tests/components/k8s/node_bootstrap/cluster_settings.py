"""The small cluster the bootstrap tests describe: two control-plane nodes behind an endpoint and
one GPU worker; each test module adds what it needs (`cluster_settings(worker_nodes=[...])`)."""

from __future__ import annotations

import base64
from typing import Any

from components.k8s.node_bootstrap.control_plane_join import ControlPlaneJoin
from components.k8s.node_bootstrap.spec import ClusterNode

GPU_WORKER = ClusterNode(name="gpu-1", management_ip="10.0.0.21", rdma_ip="192.168.0.51", gpu=True)


def cluster_settings(**overrides: Any) -> dict[str, Any]:
    """Keyword arguments of `ClusterSpec` (or `ClusterBootstrapArgs`), `overrides` applied."""
    settings: dict[str, Any] = {
        "cluster_name": "gpu",
        "kubernetes_version": "1.34.2",
        "pod_cidr": "10.244.0.0/16",
        "service_cidr": "10.96.0.0/12",
        "control_plane_endpoint": "10.0.0.10",
        "control_plane_nodes": [
            ClusterNode(name="cp-1", management_ip="10.0.0.11"),
            ClusterNode(name="cp-2", management_ip="10.0.0.12"),
        ],
        "worker_nodes": [GPU_WORKER],
    }
    settings.update(overrides)
    return settings


TEST_ENCRYPTION_KEYS = {"key-1": base64.b64encode(bytes(range(32))).decode()}
"""A Secrets encryption key for `ClusterPki` (the stack generates 32 random bytes per key)."""
PEM_FIELDS = ("ca_cert_pem", "ca_key_pem", "front_proxy_ca_cert_pem", "front_proxy_ca_key_pem", "etcd_ca_cert_pem")
PEM_FIELDS += ("etcd_ca_key_pem", "service_account_key_pem", "service_account_pub_pem")
"""The PEM fields of `ClusterPki` (all but the encryption keys)."""


def _test_cluster_ca() -> tuple[str, str]:
    """A real (EC, one day) CA certificate and kubeadm's pin of it: the script checks the one
    against the other with openssl before it trusts the certificate."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from components.k8s.node_bootstrap import spki_sha256

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_bytes(serialization.Encoding.PEM).decode(), spki_sha256(public.decode())


CLUSTER_CA_CERT_PEM, CLUSTER_CA_HASH = _test_cluster_ca()
"""The cluster CA certificate the joining control-plane nodes receive, and its pin."""
CONTROL_PLANE_JOIN = ControlPlaneJoin(
    token="cpjoin.0123456789abcdef", certificate_key="5e" * 32, ca_cert_pem=CLUSTER_CA_CERT_PEM
)
"""What a joining control-plane node's user-data carries (issue 40, item 5)."""


def _test_handoff_signer() -> tuple[str, str]:
    """A real ECDSA P-256 key pair, as ClusterBootstrap's `tls.PrivateKey` makes it: the stack
    signs the init node's sealed keys with the private half (PEM, SEC1 as pulumi-tls writes it)
    and the node checks the signature with openssl and the public half from its user-data."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private.decode(), public.decode()


HANDOFF_SIGNING_KEY_PEM, HANDOFF_SIGNER_PEM = _test_handoff_signer()
"""The stack's key hand-off signing key (secret, InitPkiDelivery's) and its public half (the init
node's user-data)."""
