"""The `kubeadm-certs` Secret in kubeadm's own format, written by the stack instead of `--upload-certs`.

What `kubeadm join --control-plane` with a certificate key reads (kubernetes/kubernetes,
cmd/kubeadm/app/phases/copycerts/copycerts.go, `UploadCerts` / `DownloadCerts`):

- the Secret `kube-system/kubeadm-certs` (`kubeadmconstants.KubeadmCertsSecret`);
- one data entry per file of `certsToTransfer` with local etcd: `ca.crt`, `ca.key`,
  `front-proxy-ca.crt`, `front-proxy-ca.key`, `sa.pub`, `sa.key`, `etcd-ca.crt`, `etcd-ca.key`
  (`certOrKeyNameToSecretName` turns `etcd/ca.crt` into `etcd-ca.crt`); `DownloadCerts` fails
  when any is missing;
- each value is `cryptoutil.EncryptBytes(file, key)` (cmd/kubeadm/app/util/crypto/crypto.go):
  AES-GCM under the certificate key, the 12-byte nonce first: `gcm.Seal(nonce, nonce, data, nil)`;
  `DecryptBytes` splits the nonce off and opens the rest;
- the certificate key is 32 random bytes, hex encoded (`CreateCertificateKey`,
  `kubeadmconstants.CertificateKeySize`), so AES-256;
- the Secret's owner is a bootstrap-token Secret (`getSecretOwnerRef`: a controller reference to
  `bootstrap-token-<id>`, apiVersion `v1`, kind `Secret`), so when the token cleaner deletes the
  expired token the garbage collector deletes the certificates with it. kubeadm's token lives
  `DefaultCertTokenDuration`, two hours.

kubeadm draws a random nonce for every upload. The stack computes the Secret inside a Pulumi
program, where a random nonce would change the Secret on every preview; the nonce here is a
synthetic IV instead, HMAC-SHA256(key, name, plaintext) cut to 12 bytes: it repeats only for the
same entry with the same content under the same key, which then gives the same ciphertext and so
reveals nothing but that equality (the certificate key is new with every short-lived token).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KUBEADM_CERTS_SECRET = "kubeadm-certs"
"""`kubeadmconstants.KubeadmCertsSecret`."""
CERTIFICATE_KEY_BYTES = 32
"""`kubeadmconstants.CertificateKeySize`: AES-256."""
NONCE_BYTES = 12
"""Go's `cipher.NewGCM` nonce size (`gcm.NonceSize()`)."""
CERT_TOKEN_TTL_HOURS = 2
"""`kubeadmconstants.DefaultCertTokenDuration`: how long kubeadm's own upload lives."""

SECRET_ENTRY_NAMES = (
    "ca.crt",
    "ca.key",
    "front-proxy-ca.crt",
    "front-proxy-ca.key",
    "sa.pub",
    "sa.key",
    "etcd-ca.crt",
    "etcd-ca.key",
)
"""`certsToTransfer` for a local etcd, after `certOrKeyNameToSecretName`."""


def new_certificate_key() -> str:
    """A fresh certificate key as `kubeadm certs certificate-key` prints it (64 hex digits)."""
    return secrets.token_hex(CERTIFICATE_KEY_BYTES)


def decode_certificate_key(certificate_key: str) -> bytes:
    key = bytes.fromhex(certificate_key)
    if len(key) != CERTIFICATE_KEY_BYTES:
        raise ValueError(f"a certificate key is {CERTIFICATE_KEY_BYTES} bytes hex encoded, got {len(key)} bytes")
    return key


def encrypt_entry(name: str, plaintext: bytes, certificate_key: str) -> bytes:
    """`EncryptBytes`' layout (nonce, then ciphertext and tag) with the synthetic nonce above."""
    key = decode_certificate_key(certificate_key)
    nonce = hmac.new(key, name.encode() + b"\0" + plaintext, hashlib.sha256).digest()[:NONCE_BYTES]
    return nonce + AESGCM(key).encrypt(nonce, plaintext, None)


def encrypted_secret_data(files: Mapping[str, str], certificate_key: str) -> dict[str, str]:
    """The Secret's `data` (base64, as the API stores it) for `files` by entry name.

    Every entry `DownloadCerts` requires must be there: a Secret without one would only fail on
    the joining node, long after `pulumi up` reported success."""
    missing = [name for name in SECRET_ENTRY_NAMES if not files.get(name)]
    if missing:
        raise ValueError(f"kubeadm-certs needs every entry of certsToTransfer; missing: {', '.join(missing)}")
    return {
        name: base64.b64encode(encrypt_entry(name, content.encode(), certificate_key)).decode()
        for name, content in files.items()
    }


def owner_reference(token_secret_name: str, token_secret_uid: str) -> dict[str, object]:
    """`metav1.NewControllerRef(secret, {Version: v1, Kind: Secret})` as `getSecretOwnerRef` builds it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "name": token_secret_name,
        "uid": token_secret_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
