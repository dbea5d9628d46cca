"""A CMS EnvelopedData (RFC 5652) with RSAES-OAEP key transport (RFC 3560, RFC 8017): what
`openssl cms -decrypt -inkey KEY -recip CERT` opens with no key on its command line.

Why by hand: `cryptography`'s `PKCS7EnvelopeBuilder` wraps the content key with PKCS#1 v1.5 only
(hazmat/primitives/serialization/pkcs7.py: no padding option), which FIPS 140-3 no longer allows for
key transport; OpenSSL's CMS opens OAEP recipients (crypto/cms/cms_rsa.c, `rsa_cms_decrypt`). The
structure is small and fixed, so a few DER writers suffice:

    ContentInfo { id-envelopedData, [0] EnvelopedData {
      version 0,
      recipientInfos SET { KeyTransRecipientInfo {
        version 0, rid IssuerAndSerialNumber { issuer, serial },
        keyEncryptionAlgorithm { id-RSAES-OAEP, RSAES-OAEP-params { [0] sha256, [1] mgf1(sha256) } },
        encryptedKey } },
      encryptedContentInfo { id-data, { aes256-CBC, iv }, [0] IMPLICIT ciphertext } } }

AES-256-CBC carries no integrity of its own: the hand-off signs the whole envelope and the node
checks the signature before it decrypts anything (key_handoff.py).
"""

from __future__ import annotations

import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import padding as symmetric_padding
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

OAEP = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA256()), algorithm=hashes.SHA256(), label=None)
"""RSAES-OAEP with SHA-256 and MGF1-SHA-256, the parameters the envelope names."""

_ID_DATA = "1.2.840.113549.1.7.1"
_ID_ENVELOPED_DATA = "1.2.840.113549.1.7.3"
_ID_RSAES_OAEP = "1.2.840.113549.1.1.7"
_ID_MGF1 = "1.2.840.113549.1.1.8"
_ID_SHA256 = "2.16.840.1.101.3.4.2.1"
_ID_AES256_CBC = "2.16.840.1.101.3.4.1.42"


def _tlv(tag: int, content: bytes) -> bytes:
    length = len(content)
    if length < 0x80:
        return bytes([tag, length]) + content
    size = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content


def _sequence(*items: bytes) -> bytes:
    return _tlv(0x30, b"".join(items))


def _integer(value: int) -> bytes:
    # Two's complement, big-endian: a leading zero byte keeps a positive value positive.
    return _tlv(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True))


def _oid(dotted: str) -> bytes:
    first, second, *rest = (int(part) for part in dotted.split("."))
    body = bytearray([40 * first + second])
    for arc in rest:
        chunk = [arc & 0x7F]
        arc >>= 7
        while arc:
            chunk.append(0x80 | (arc & 0x7F))
            arc >>= 7
        body.extend(reversed(chunk))
    return _tlv(0x06, bytes(body))


def _algorithm(dotted: str, parameters: bytes | None = None) -> bytes:
    return _sequence(_oid(dotted), parameters if parameters is not None else b"")


_SHA256 = _algorithm(_ID_SHA256, b"\x05\x00")  # RFC 4055: parameters NULL
_OAEP_PARAMETERS = _sequence(_tlv(0xA0, _SHA256), _tlv(0xA1, _algorithm(_ID_MGF1, _SHA256)))


def envelope_der(content: bytes, recipient: x509.Certificate) -> bytes:
    """`content` sealed to `recipient`'s RSA key: a fresh AES-256 key and IV every call."""
    public_key = recipient.public_key()
    if not isinstance(public_key, rsa.RSAPublicKey):
        raise ValueError("the recipient's key must be RSA")
    key, iv = os.urandom(32), os.urandom(16)
    padder = symmetric_padding.PKCS7(128).padder()
    padded = padder.update(content) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    ciphertext = encryptor.update(padded) + encryptor.finalize()
    recipient_info = _sequence(
        _integer(0),
        _sequence(recipient.issuer.public_bytes(), _integer(recipient.serial_number)),
        _algorithm(_ID_RSAES_OAEP, _OAEP_PARAMETERS),
        _tlv(0x04, public_key.encrypt(key, OAEP)),
    )
    encrypted_content_info = _sequence(
        _oid(_ID_DATA),
        _algorithm(_ID_AES256_CBC, _tlv(0x04, iv)),
        _tlv(0x80, ciphertext),
    )
    enveloped_data = _sequence(_integer(0), _tlv(0x31, recipient_info), encrypted_content_info)
    return _sequence(_oid(_ID_ENVELOPED_DATA), _tlv(0xA0, enveloped_data))
