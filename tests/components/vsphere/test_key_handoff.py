"""The init node's key hand-off without vCenter (components/vsphere/key_handoff.py, cms_envelope.py,
pki_delivery.py): what a request must be, how the envelope opens (with the real openssl CLI, as the
node opens it), and when the stack counts the keys as delivered. The same exchange with the
simulator: test_vcsim_init_pki_delivery.py."""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from components.vcenter.errors import VsphereError
from components.vsphere.key_handoff import (
    ENVELOPE_KEY,
    MAXIMUM_ENVELOPE_CHARS,
    RECEIVED_KEY,
    REQUEST_KEY,
    HandoffEnvelopeError,
    HandoffRequestError,
    envelope_recipient,
    request_certificate,
    request_fingerprint,
    seal_bundle,
)
from components.vsphere.pki_delivery import DeliveryWait, InitPkiDeliveryProvider, delivered, earlier_answer
from tests.components.k8s.node_bootstrap.cluster_settings import HANDOFF_SIGNER_PEM, HANDOFF_SIGNING_KEY_PEM


def _request(tmp_path: Path, algorithm: str = "rsa:2048") -> tuple[str, Path]:
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", algorithm, "-nodes", "-days", "1", "-subj", "/CN=t",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    der = subprocess.run(["openssl", "x509", "-in", str(cert), "-outform", "der"], check=True, capture_output=True)
    return base64.b64encode(der.stdout).decode(), key


def _open(envelope: str, key_file: Path, signer_pem: str = HANDOFF_SIGNER_PEM) -> bytes:
    """As the node's `open_envelope`, with the openssl CLI: the signature, then `cms -decrypt`."""
    home = key_file.parent
    version, fingerprint, cms, signature = envelope.split(".")
    assert version == "v2"
    (home / "signer.pem").write_text(signer_pem)
    (home / "signed").write_text(f"{version}.{fingerprint}.{cms}")
    (home / "sig").write_bytes(base64.b64decode(signature))
    verified = subprocess.run(
        ["openssl", "dgst", "-sha256", "-verify", str(home / "signer.pem"), "-signature", str(home / "sig"),
         str(home / "signed")],
        capture_output=True,
    )  # fmt: skip
    if verified.returncode != 0:
        raise ValueError("not signed by the stack")
    (home / "env.der").write_bytes(base64.b64decode(cms))
    opened = subprocess.run(
        ["openssl", "cms", "-decrypt", "-inform", "DER", "-in", str(home / "env.der"), "-inkey", str(key_file),
         "-recip", str(home / "c.pem")],
        capture_output=True,
    )  # fmt: skip
    if opened.returncode != 0:
        raise ValueError(opened.stderr.decode())
    return opened.stdout


def test_an_envelope_opens_only_with_the_requesting_key_and_is_fresh_each_time(tmp_path: Path) -> None:
    request, key = _request(tmp_path)
    first = seal_bundle(b"the bundle", request, HANDOFF_SIGNING_KEY_PEM)
    second = seal_bundle(b"the bundle", request, HANDOFF_SIGNING_KEY_PEM)
    assert _open(first, key) == b"the bundle"
    assert first.split(".")[2] != second.split(".")[2]  # a fresh content key and IV for every answer
    (tmp_path / "other").mkdir()
    _, other_key = _request(tmp_path / "other")
    with pytest.raises(ValueError):
        _open(first, other_key)


def test_the_envelope_names_the_certificate_it_answers(tmp_path: Path) -> None:
    request, _ = _request(tmp_path)
    envelope = seal_bundle(b"the bundle", request, HANDOFF_SIGNING_KEY_PEM)
    assert envelope_recipient(envelope) == request_fingerprint(request)
    for value in ("v1.a.b.c.d", "v2.nothex.b.c", "garbage"):
        with pytest.raises(HandoffEnvelopeError):
            envelope_recipient(value)


def test_an_envelope_tampered_with_or_signed_by_another_key_fails_its_signature(tmp_path: Path) -> None:
    request, key = _request(tmp_path)
    version, fingerprint, cms, signature = seal_bundle(b"the bundle", request, HANDOFF_SIGNING_KEY_PEM).split(".")
    raw = base64.b64decode(cms)
    flipped = base64.b64encode(raw[:-1] + bytes([raw[-1] ^ 1])).decode()
    with pytest.raises(ValueError, match="not signed by the stack"):
        _open(".".join((version, fingerprint, flipped, signature)), key)
    other = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(ValueError, match="not signed by the stack"):
        _open(seal_bundle(b"forged", request, other.decode()), key)


@pytest.mark.parametrize(
    ("pem", "says"),
    [
        ("not a key", "not a PEM private key"),
        (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            .decode(),
            "must be ECDSA P-256",
        ),
    ],
)
def test_a_signing_key_that_is_not_ecdsa_p256_is_refused(tmp_path: Path, pem: str, says: str) -> None:
    request, _ = _request(tmp_path)
    with pytest.raises(ValueError, match=says):
        seal_bundle(b"the bundle", request, pem)


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
        seal_bundle(bytes(MAXIMUM_ENVELOPE_CHARS), request, HANDOFF_SIGNING_KEY_PEM)


def test_the_fingerprint_is_the_sha256_of_the_certificate_as_the_node_hashes_it(tmp_path: Path) -> None:
    request, _ = _request(tmp_path)
    assert request_fingerprint(request) == "sha256:" + hashlib.sha256(base64.b64decode(request)).hexdigest()


def test_the_keys_count_as_delivered_only_when_the_node_answered_the_request_they_were_sealed_to(
    tmp_path: Path,
) -> None:
    request, _ = _request(tmp_path)
    answer = request_fingerprint(request)
    assert not delivered({}, answer)
    assert not delivered({REQUEST_KEY: request}, answer)
    assert delivered({REQUEST_KEY: request, RECEIVED_KEY: answer}, answer)
    (tmp_path / "newer").mkdir()
    newer, _ = _request(tmp_path / "newer")
    # Someone else's request beside the answer: not delivered (the delivery then fails: exposed).
    assert not delivered({REQUEST_KEY: newer, RECEIVED_KEY: answer}, answer)
    # An answer naming another certificate than the one sealed to: not this delivery's.
    assert not delivered({REQUEST_KEY: newer, RECEIVED_KEY: request_fingerprint(newer)}, answer)
    assert delivered({RECEIVED_KEY: answer}, answer)  # the request removed after the answer, by an earlier run
    assert not delivered({RECEIVED_KEY: "sha256:" + "cd" * 32}, answer)  # an answer to another certificate
    assert delivered({REQUEST_KEY: "garbage", RECEIVED_KEY: answer}, answer)


def test_a_rerun_knows_which_request_an_earlier_run_answered(tmp_path: Path) -> None:
    request, _ = _request(tmp_path)
    envelope = seal_bundle(b"the bundle", request, HANDOFF_SIGNING_KEY_PEM)
    assert earlier_answer({REQUEST_KEY: request, ENVELOPE_KEY: envelope}) == request_fingerprint(request)
    assert earlier_answer({RECEIVED_KEY: "sha256:" + "ab" * 32}) == "sha256:" + "ab" * 32
    assert earlier_answer({REQUEST_KEY: request}) is None


def test_the_delivery_seals_to_the_first_request_only_and_fails_on_a_second(tmp_path: Path) -> None:
    """The delivery's decision without vCenter: the VM's extraConfig is a dict the node and an
    intruder write to between polls (the simulator runs the same: test_vcsim_init_pki_delivery.py)."""
    first, _ = _request(tmp_path)
    (tmp_path / "second").mkdir()
    second, _ = _request(tmp_path / "second")
    vm: dict[str, str] = {REQUEST_KEY: first}
    sent: list[str] = []
    polls = [lambda: None, lambda: vm.update({REQUEST_KEY: second})]
    ticks = iter(range(1000))

    def sleep(_seconds: float) -> None:  # between two polls: the intruder's turn, then nobody's
        if polls:
            polls.pop(0)()

    wait = DeliveryWait(poll_seconds=0, clock=lambda: float(next(ticks)), sleep=sleep)
    provider = InitPkiDeliveryProvider(wait=wait)
    provider._first_look = lambda _id, _label: (False, False)  # type: ignore[method-assign]
    provider._values = lambda _id, _label: dict(vm)  # type: ignore[method-assign]

    def send(_id: str, _label: str, envelope: str) -> None:
        sent.append(envelope)
        vm[ENVELOPE_KEY] = envelope

    provider._send = send  # type: ignore[method-assign]
    props = {"vm_id": "uuid", "vm_name": "cp-1", "bundle": "", "signing_key": HANDOFF_SIGNING_KEY_PEM}
    with pytest.raises(VsphereError, match="keys exposed: rotate") as failed:
        provider.create({**props, "wait_seconds": 60})
    assert request_fingerprint(first) in str(failed.value) and request_fingerprint(second) in str(failed.value)
    assert [envelope_recipient(e) for e in sent] == [request_fingerprint(first)]  # nothing sealed to the second
