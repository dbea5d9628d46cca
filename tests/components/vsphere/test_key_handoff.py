"""The init node's key hand-off without vCenter (components/vsphere/key_handoff.py, pki_delivery.py):
what a request must be, how the envelope opens, and when the stack counts the keys as delivered.
The same exchange with the real openssl and the simulator: test_vcsim_init_pki_delivery.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from components.vsphere.key_handoff import (
    MAXIMUM_ENVELOPE_CHARS,
    OAEP,
    RECEIVED_KEY,
    REQUEST_KEY,
    HandoffRequestError,
    derived_keys,
    envelope_mac,
    request_certificate,
    request_fingerprint,
    seal_bundle,
)
from components.vsphere.pki_delivery import delivered


def _request(tmp_path: Path, algorithm: str = "rsa:2048") -> tuple[str, Path]:
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", algorithm, "-nodes", "-days", "1", "-subj", "/CN=t",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    der = subprocess.run(["openssl", "x509", "-in", str(cert), "-outform", "der"], check=True, capture_output=True)
    return base64.b64encode(der.stdout).decode(), key


def _open(envelope: str, key_file: Path) -> bytes:
    version, wrapped, iv, ciphertext, mac = envelope.split(".")
    assert version == "v1"
    private = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    assert isinstance(private, rsa.RSAPrivateKey)
    encryption_key, mac_key = derived_keys(private.decrypt(base64.b64decode(wrapped), OAEP))
    assert hmac.compare_digest(envelope_mac(iv, ciphertext, mac_key), mac)
    decryptor = Cipher(algorithms.AES(encryption_key), modes.CTR(bytes.fromhex(iv))).decryptor()
    return decryptor.update(base64.b64decode(ciphertext)) + decryptor.finalize()


def test_an_envelope_opens_only_with_the_requesting_key_and_is_fresh_each_time(tmp_path: Path) -> None:
    request, key = _request(tmp_path)
    first, second = seal_bundle(b"the bundle", request), seal_bundle(b"the bundle", request)
    assert _open(first, key) == b"the bundle"
    assert first != second  # a fresh wrapped key and IV for every answer
    (tmp_path / "other").mkdir()
    _, other_key = _request(tmp_path / "other")
    with pytest.raises(ValueError):
        _open(first, other_key)


def test_a_tampered_envelope_fails_its_mac(tmp_path: Path) -> None:
    request, key = _request(tmp_path)
    version, wrapped, iv, ciphertext, mac = seal_bundle(b"the bundle", request).split(".")
    flipped = base64.b64encode(bytes([base64.b64decode(ciphertext)[0] ^ 1]) + base64.b64decode(ciphertext)[1:]).decode()
    with pytest.raises(AssertionError):
        _open(".".join((version, wrapped, iv, flipped, mac)), key)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("not base64!", "not a base64 DER certificate"),
        (base64.b64encode(b"junk").decode(), "not a base64 DER certificate"),
    ],
)
def test_a_request_that_is_no_certificate_is_refused(value: str, says: str) -> None:
    with pytest.raises(HandoffRequestError, match=says):
        request_certificate(value)


def test_a_request_without_an_rsa_key_of_2048_bits_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HandoffRequestError, match="RSA key of 2048 bits"):
        request_certificate(_ec_request())
    (tmp_path / "small").mkdir()
    small, _ = _request(tmp_path / "small", "rsa:1024")
    with pytest.raises(HandoffRequestError, match="RSA key of 2048 bits"):
        request_certificate(small)


def _ec_request() -> str:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "t")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()


def test_a_bundle_too_large_for_a_guestinfo_value_is_refused(tmp_path: Path) -> None:
    request, _ = _request(tmp_path)
    with pytest.raises(ValueError, match="more than a guestinfo value carries"):
        seal_bundle(bytes(MAXIMUM_ENVELOPE_CHARS), request)


def test_the_fingerprint_is_the_sha256_of_the_certificate_as_the_node_hashes_it(tmp_path: Path) -> None:
    request, _ = _request(tmp_path)
    assert request_fingerprint(request) == "sha256:" + hashlib.sha256(base64.b64decode(request)).hexdigest()


def test_the_keys_count_as_delivered_only_when_the_node_answered_its_own_request(tmp_path: Path) -> None:
    request, _ = _request(tmp_path)
    answer = request_fingerprint(request)
    assert not delivered({})
    assert not delivered({REQUEST_KEY: request})
    assert delivered({REQUEST_KEY: request, RECEIVED_KEY: answer})
    (tmp_path / "newer").mkdir()
    newer, _ = _request(tmp_path / "newer")
    assert not delivered({REQUEST_KEY: newer, RECEIVED_KEY: answer})  # an answer to an older request
    assert delivered({RECEIVED_KEY: answer})  # the request removed after the answer, by an earlier run
    assert not delivered({REQUEST_KEY: "garbage", RECEIVED_KEY: answer})
