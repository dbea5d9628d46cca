"""What a joining control-plane node receives instead of the cluster's keys (issue 40, item 5).

A control-plane node other than the one that runs `kubeadm init` gets no private key in its
user-data (which vCenter logs and keeps, docs/security.md): only a short-lived bootstrap token, a
fresh certificate key and the cluster CA's certificate (public). With those it fetches, over the
API server's TLS, two Secrets the stack wrote before (components/k8s/join/control_plane.py), both
owned by that token's Secret so that Kubernetes deletes them with the token when it expires:

- `kube-system/kubeadm-certs`, in kubeadm's format, which `kubeadm join --control-plane` with
  `controlPlane.certificateKey` downloads itself (copycerts.go, `DownloadCerts`);
- `kube-system/gpucluster-encryption-config`: the API server's EncryptionConfiguration, sealed
  with the same certificate key, which the bootstrap script fetches and opens before it runs
  `kubeadm join` (the API server's static pod reads it when it starts).

This Secret is AES-256-CTR with an HMAC-SHA256 over the IV and ciphertext as the Secret carries
them (encrypt-then-MAC), with the two keys derived from the certificate key by HMAC-SHA256. The
IV is synthetic (an HMAC of the plaintext), so the same configuration under the same key gives the
same Secret and a preview shows no change. The node opens it in Python (gpucluster-bootstrap.sh,
`open_sealed_program`: the standard library's HMAC, `cryptography`'s `modes.CTR` as here), with no
key on a command line (issue 53 item 3). CTR rather than kubeadm's AES-GCM because a template
without python3-cryptography still opens it with `openssl enc`, which refuses AEAD ciphers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

ENCRYPTION_CONFIG_SECRET = "gpucluster-encryption-config"
"""kube-system/<this>: the sealed EncryptionConfiguration for joining control-plane nodes."""
CONTROL_PLANE_JOIN_GROUP = "system:bootstrappers:gpucluster:control-plane-join"
"""The extra group of the control-plane join token: the only subject allowed to read the two
Secrets (the bootstrap-token authenticator requires the `system:bootstrappers:` prefix)."""
ENCRYPTION_KEY_LABEL = b"gpucluster encryption-config aes-256-ctr"
MAC_KEY_LABEL = b"gpucluster encryption-config hmac-sha256"
IV_BYTES = 16


@dataclass(frozen=True, kw_only=True)
class ControlPlaneJoin:
    """What a joining control-plane node's user-data carries (secret, but short-lived)."""

    token: str
    """The control-plane join token, `<id>.<secret>`: expires with the Secrets it owns."""
    certificate_key: str
    """64 hex digits: opens kubeadm-certs and the sealed EncryptionConfiguration."""
    ca_cert_pem: str
    """The cluster CA certificate (public): what the script's fetch trusts, after checking its pin."""


def derived_keys(certificate_key: str) -> tuple[bytes, bytes]:
    """(AES key, HMAC key), each HMAC-SHA256(certificate key, label)."""
    key = bytes.fromhex(certificate_key)
    if len(key) != 32:
        raise ValueError("a certificate key is 32 bytes, hex encoded")
    return (
        hmac.new(key, ENCRYPTION_KEY_LABEL, hashlib.sha256).digest(),
        hmac.new(key, MAC_KEY_LABEL, hashlib.sha256).digest(),
    )


def seal(plaintext: bytes, certificate_key: str) -> dict[str, str]:
    """The Secret's data entries, unencoded: `iv` and `mac` hex, `ciphertext` base64."""
    encryption_key, mac_key = derived_keys(certificate_key)
    iv = hmac.new(mac_key, b"iv\0" + plaintext, hashlib.sha256).digest()[:IV_BYTES]
    encryptor = Cipher(algorithms.AES(encryption_key), modes.CTR(iv)).encryptor()
    ciphertext = encryptor.update(plaintext) + encryptor.finalize()
    sealed = {"iv": iv.hex(), "ciphertext": base64.b64encode(ciphertext).decode()}
    return {**sealed, "mac": mac_of(sealed, mac_key)}


def mac_of(sealed: dict[str, str], mac_key: bytes) -> str:
    """HMAC-SHA256 over `<iv hex>:<ciphertext base64>`: text the script can hash as it received it."""
    return hmac.new(mac_key, f"{sealed['iv']}:{sealed['ciphertext']}".encode(), hashlib.sha256).hexdigest()
