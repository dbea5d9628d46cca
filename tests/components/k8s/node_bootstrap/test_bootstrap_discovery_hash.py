"""The discovery pin, checked against kubeadm's documented openssl pipeline on real keys.

kubeadm's docs compute `--discovery-token-ca-cert-hash` from the CA *certificate* with
`openssl x509 -pubkey -in ca.crt | openssl rsa -pubin -outform der | openssl dgst -sha256`.
We compute it from the CA *key's* public PEM (what pulumi-tls exports). Both must agree.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from components.k8s.node_bootstrap import pem_body, spki_sha256

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="the openssl CLI is the independent reference here"
)


def openssl(*args: str, input_bytes: bytes | None = None) -> bytes:
    result = subprocess.run(["openssl", *args], input=input_bytes, capture_output=True)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def make_ca(tmp_path: Path, key_args: list[str]) -> tuple[str, Path]:
    """A CA key (public half as PKIX PEM, like pulumi-tls) and its self-signed certificate."""
    key = tmp_path / "ca.key"
    cert = tmp_path / "ca.crt"
    openssl("genpkey", *key_args, "-out", str(key))
    openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        str(key),
        "-subj",
        "/CN=kubernetes",
        "-days",
        "1",
        "-out",
        str(cert),
    )
    public_pem = openssl("pkey", "-in", str(key), "-pubout").decode()
    return public_pem, cert


def kubeadm_documented_hash(cert: Path) -> str:
    public = openssl("x509", "-pubkey", "-noout", "-in", str(cert))
    der = openssl("pkey", "-pubin", "-outform", "der", input_bytes=public)
    digest = openssl("dgst", "-sha256", "-r", input_bytes=der).decode().split()[0]
    return f"sha256:{digest}"


@pytest.mark.parametrize(
    "key_args",
    [
        ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
        ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
    ],
    ids=["rsa-2048", "ecdsa-p256"],
)
def test_pin_from_the_key_matches_kubeadms_pin_from_the_certificate(tmp_path: Path, key_args: list[str]) -> None:
    public_pem, cert = make_ca(tmp_path, key_args)
    assert public_pem.startswith("-----BEGIN PUBLIC KEY-----")
    assert spki_sha256(public_pem) == kubeadm_documented_hash(cert)


def test_pkcs1_public_key_is_refused(tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(key))
    pkcs1 = openssl("rsa", "-in", str(key), "-RSAPublicKey_out").decode()
    assert "BEGIN RSA PUBLIC KEY" in pkcs1
    with pytest.raises(ValueError, match="no 'PUBLIC KEY' PEM block"):
        spki_sha256(pkcs1)


def test_pem_body_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="not valid base64"):
        pem_body("-----BEGIN PUBLIC KEY-----\n!!!\n-----END PUBLIC KEY-----\n", "PUBLIC KEY")
