"""The stack's `kubeadm-certs` Secret opens with kubeadm's own download logic (tests/.../kubeadm_download.py)."""

from __future__ import annotations

import base64
import datetime
from functools import cache

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from components.k8s.join import kubeadm_certs
from tests.components.k8s.join.kubeadm_download import KubeadmError, decrypt_bytes, download_certs


def _key_pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()


def _ca(common_name: str) -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key)


@cache
def _files() -> dict[str, str]:
    ca_crt, ca_key = _ca("kubernetes")
    fp_crt, fp_key = _ca("front-proxy-ca")
    etcd_crt, etcd_key = _ca("etcd-ca")
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_pub = sa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return {
        "ca.crt": ca_crt,
        "ca.key": ca_key,
        "front-proxy-ca.crt": fp_crt,
        "front-proxy-ca.key": fp_key,
        "sa.pub": sa_pub.decode(),
        "sa.key": _key_pem(sa),
        "etcd-ca.crt": etcd_crt,
        "etcd-ca.key": etcd_key,
    }


def test_kubeadm_download_certs_reads_every_file_back() -> None:
    key = kubeadm_certs.new_certificate_key()
    data = kubeadm_certs.encrypted_secret_data(_files(), key)
    written = download_certs(data, key)
    files = _files()
    assert written == {
        "ca.crt": files["ca.crt"].encode(),
        "ca.key": files["ca.key"].encode(),
        "front-proxy-ca.crt": files["front-proxy-ca.crt"].encode(),
        "front-proxy-ca.key": files["front-proxy-ca.key"].encode(),
        "sa.pub": files["sa.pub"].encode(),
        "sa.key": files["sa.key"].encode(),
        "etcd/ca.crt": files["etcd-ca.crt"].encode(),
        "etcd/ca.key": files["etcd-ca.key"].encode(),
    }


def test_no_plaintext_key_in_the_secret_data() -> None:
    key = kubeadm_certs.new_certificate_key()
    data = kubeadm_certs.encrypted_secret_data(_files(), key)
    for value in data.values():
        raw = base64.b64decode(value)
        assert b"PRIVATE KEY" not in raw
        assert b"BEGIN" not in raw


def test_another_certificate_key_cannot_open_it() -> None:
    data = kubeadm_certs.encrypted_secret_data(_files(), kubeadm_certs.new_certificate_key())
    with pytest.raises(Exception) as caught:
        download_certs(data, kubeadm_certs.new_certificate_key())
    assert type(caught.value).__name__ == "InvalidTag"


def test_a_secret_missing_an_entry_is_refused_before_kubeadm_would() -> None:
    files = {name: content for name, content in _files().items() if name != "etcd-ca.key"}
    with pytest.raises(ValueError, match=r"etcd-ca\.key"):
        kubeadm_certs.encrypted_secret_data(files, kubeadm_certs.new_certificate_key())
    # and kubeadm itself would refuse it too: the check is the one DownloadCerts makes
    key = kubeadm_certs.new_certificate_key()
    data = {
        name: base64.b64encode(kubeadm_certs.encrypt_entry(name, content.encode(), key)).decode()
        for name, content in files.items()
    }
    with pytest.raises(KubeadmError, match=r"etcd/ca\.key"):
        download_certs(data, key)


def test_same_inputs_same_ciphertext_other_content_other_nonce() -> None:
    key = kubeadm_certs.new_certificate_key()
    first = kubeadm_certs.encrypt_entry("ca.key", b"one", key)
    assert first == kubeadm_certs.encrypt_entry("ca.key", b"one", key)  # a preview shows no change
    other = kubeadm_certs.encrypt_entry("ca.key", b"two", key)
    assert first[:12] != other[:12]
    assert kubeadm_certs.encrypt_entry("sa.key", b"one", key)[:12] != first[:12]
    assert decrypt_bytes(other, bytes.fromhex(key)) == b"two"


def test_certificate_key_is_kubeadms_size() -> None:
    key = kubeadm_certs.new_certificate_key()
    assert len(key) == 64
    with pytest.raises(ValueError, match="32 bytes"):
        kubeadm_certs.decode_certificate_key("ab" * 16)


def test_owner_reference_is_a_controller_reference_to_the_token_secret() -> None:
    assert kubeadm_certs.owner_reference("bootstrap-token-abcdef", "uid-1") == {
        "apiVersion": "v1",
        "kind": "Secret",
        "name": "bootstrap-token-abcdef",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
