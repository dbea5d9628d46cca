"""The join token and the CA pin: kubeadm's formats, computed without an X.509 library.

Why discovery by `caCertHashes` and not `discovery.file`: the hash pins the CA's public key, needs
no extra file on the worker, and is computable from the CA key's public half (see `spki_sha256`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

BOOTSTRAP_TOKEN_PATTERN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
"""kubeadm's bootstrap token: `<6 char id>.<16 char secret>`, lowercase letters and digits."""


def spki_sha256(public_key_pem: str) -> str:
    """kubeadm's discovery pin for a CA: `sha256:` + hex SHA-256 of the DER SubjectPublicKeyInfo.

    kubeadm hashes `x509.Certificate.RawSubjectPublicKeyInfo` (RFC 7469 pin). A "PUBLIC KEY"
    PEM block (what pulumi-tls exports as `public_key_pem`, Go's `MarshalPKIXPublicKey`) *is* that
    DER SubjectPublicKeyInfo, base64-armoured, and a certificate made from the same key embeds
    the identical structure. So the hash needs no X.509 parser. A PKCS#1 "RSA PUBLIC KEY" block
    lacks the algorithm identifier and would give a wrong pin, so it is refused.
    """
    der = pem_body(public_key_pem, "PUBLIC KEY")
    return "sha256:" + hashlib.sha256(der).hexdigest()


def pem_body(pem: str, label: str) -> bytes:
    """The DER bytes of the first PEM block labelled `label`."""
    begin, end = f"-----BEGIN {label}-----", f"-----END {label}-----"
    start = pem.find(begin)
    stop = pem.find(end, start + len(begin))
    if start < 0 or stop < 0:
        raise ValueError(f"no '{label}' PEM block found")
    body = "".join(pem[start + len(begin) : stop].split())
    try:
        return base64.b64decode(body, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"the '{label}' PEM block is not valid base64: {exc}") from exc


def bootstrap_token(token_id: str, token_secret: str) -> str:
    """Join the two random parts into a kubeadm bootstrap token, checking the format."""
    token = f"{token_id}.{token_secret}"
    if not BOOTSTRAP_TOKEN_PATTERN.match(token):
        # Never echo the value: it is a credential.
        raise ValueError("bootstrap token parts must be [a-z0-9]{6} and [a-z0-9]{16}")
    return token
