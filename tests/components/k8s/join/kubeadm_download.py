"""kubeadm's side of the `kubeadm-certs` Secret, re-implemented from its source for the tests.

Each function follows the Go function it names, line for line where it matters:
- `decrypt_bytes`: cmd/kubeadm/app/util/crypto/crypto.go `DecryptBytes` (AES-GCM, Go's 12-byte
  nonce first, `gcm.Open(nil, nonce, out, nil)`, no additional data; an error if the data is
  shorter than the nonce);
- `download_certs`: cmd/kubeadm/app/phases/copycerts/copycerts.go `DownloadCerts` with
  `getDataFromSecret` (every non-empty entry decrypted, any failure fails the whole download),
  `certsToTransfer` for a local etcd and `certOrKeyNameToSecretName`, and `writeCertOrKey`
  (an entry must be a PEM private key or PEM public keys/certificates, else "unknown data").
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.x509 import load_pem_x509_certificates

GCM_NONCE_SIZE = 12

# certsToTransfer, local etcd: kubeadm constant name -> path under certificatesDir.
CERTS_TO_TRANSFER = {
    "ca.crt": "ca.crt",
    "ca.key": "ca.key",
    "front-proxy-ca.crt": "front-proxy-ca.crt",
    "front-proxy-ca.key": "front-proxy-ca.key",
    "sa.pub": "sa.pub",
    "sa.key": "sa.key",
    "etcd/ca.crt": "etcd/ca.crt",
    "etcd/ca.key": "etcd/ca.key",
}


class KubeadmError(Exception):
    pass


def decrypt_bytes(data: bytes, key: bytes) -> bytes:
    if len(data) < GCM_NONCE_SIZE:
        raise KubeadmError("size of data is less than the nonce")
    nonce, out = data[:GCM_NONCE_SIZE], data[GCM_NONCE_SIZE:]
    return AESGCM(key).decrypt(nonce, out, None)


def _cert_or_key_name_to_secret_name(name: str) -> str:
    return name.replace("/", "-")


def _check_cert_or_key(data: bytes) -> None:
    """writeCertOrKey: keyutil.ParsePrivateKeyPEM, else keyutil.ParsePublicKeysPEM (which also
    takes certificates), else an error."""
    try:
        serialization.load_pem_private_key(data, password=None)
        return
    except ValueError:
        pass
    try:
        serialization.load_pem_public_key(data)
        return
    except ValueError:
        pass
    try:
        load_pem_x509_certificates(data)
        return
    except ValueError:
        raise KubeadmError("unknown data found in Secret entry") from None


def download_certs(secret_data: Mapping[str, str], certificate_key: str) -> dict[str, bytes]:
    """What `DownloadCerts` writes, by path under certificatesDir. `secret_data` as the API returns it."""
    key = bytes.fromhex(certificate_key)  # hex.DecodeString
    decrypted: dict[str, bytes] = {}
    for name, encoded in secret_data.items():
        encrypted = base64.b64decode(encoded)
        decrypted[name] = decrypt_bytes(encrypted, key) if encrypted else b""
    written: dict[str, bytes] = {}
    for cert_or_key_name, path in CERTS_TO_TRANSFER.items():
        data = decrypted.get(_cert_or_key_name_to_secret_name(cert_or_key_name))
        if data is None:
            raise KubeadmError(
                f"the Secret does not include the required certificate or key - name: {cert_or_key_name}"
            )
        if not data:
            continue
        _check_cert_or_key(data)
        written[path] = data
    return written
