"""The guestinfo channel that brings the first control-plane node its keys, sealed to a key made
on that node: never in vCenter in plain text (issue 40 item 5).

Every other way a key could reach the node that runs `kubeadm init` passes through the VM's
extraConfig, which any vCenter reader sees, the VMX writes into vmware.log at power-on and vCenter
keeps in its reconfigure events: there is no cluster yet whose TLS it could fetch them over. So
the node asks for them with a public key of its own, through the same guestinfo channel:

1. The bootstrap script (components/k8s/node_bootstrap/files/gpucluster-bootstrap.sh,
   `receive_pki`) makes an RSA key and a self-signed certificate for it under
   /var/lib/gpucluster (0700), and publishes the certificate as
   `guestinfo.gpucluster.pki.request` (`vmware-rpctool "info-set ..."`). A value the guest sets
   shows in the VM's `config.extraConfig`: VMware's VM Operator reads guest-set keys from there
   (its GuestInfo readiness probe, pkg/prober/probe/guestinfo.go, reads
   `config.extraConfig["guestinfo.<key>"]`, which its docs have the guest set with
   `vmware-rpctool "info-set guestinfo.ready true"`; pkg/providers/vsphere/vmlifecycle/
   update_status.go reads cloud-init's guest-set `guestinfo.local-ipv4` the same way).
2. The stack (`InitPkiDelivery`, components/vsphere/pki_delivery.py) reads that certificate from
   the VM, seals the PKI bundle (components/k8s/node_bootstrap/pki_handoff.py) to it and writes
   the envelope to the VM as `guestinfo.gpucluster.pki.envelope` (`ReconfigVM_Task`; the guest
   reads extraConfig set on a running VM with `info-get`: govmomi issue 223). The envelope: a
   fresh 32-byte key wrapped with RSA-OAEP (SHA-256) to the certificate's key, and the bundle
   under it as the joining control-plane nodes' Secret is sealed (AES-256-CTR, then HMAC-SHA256
   over IV and ciphertext, both keys derived from the fresh one;
   components/k8s/node_bootstrap/control_plane_join.py), with labels of its own. Only what the
   openssl command line opens (`pkeyutl -decrypt` with OAEP, `enc -aes-256-ctr`, `dgst -hmac`)
   and only algorithms a FIPS-mode template still allows: not CMS, whose RSA key transport is
   PKCS#1 v1.5 in `cryptography`'s `PKCS7EnvelopeBuilder`.
3. The node opens it (the script's `open_envelope`), stages the files, deletes its key and
   answers with the certificate's fingerprint in `guestinfo.gpucluster.pki.received`. The stack
   then removes the request and the envelope from the VM.

Only ciphertext and public values pass through vCenter. Once the node deleted its key, no copy of
the envelope (events, vmware.log, a backup of the .vmx) opens any more.

Who can subvert it: whoever can write the VM's extraConfig (VirtualMachine.Config.AdvancedConfig)
could post their own certificate before the node does, but could as well rewrite its user-data
before it boots. Any process in the guest can post one too, root or not (open-vm-tools issue
288): on a first boot, before the bootstrap, nothing but the template's own services runs.
docs/security.md lists it with the other actors.

This module is the channel and the sealing, without Kubernetes: what the bundle holds is
node_bootstrap/pki_handoff.py's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

REQUEST_KEY = "guestinfo.gpucluster.pki.request"
"""Set by the node: base64 of its handoff certificate (DER)."""
ENVELOPE_KEY = "guestinfo.gpucluster.pki.envelope"
"""Set by the stack: base64 of the CMS envelope (DER) sealed to that certificate."""
RECEIVED_KEY = "guestinfo.gpucluster.pki.received"
"""Set by the node once it staged the files: `sha256:<hex>` of the certificate it opened them with."""
HANDOFF_KEYS = (REQUEST_KEY, ENVELOPE_KEY, RECEIVED_KEY)

MINIMUM_RSA_BITS = 2048


class HandoffRequestError(ValueError):
    """A `guestinfo.gpucluster.pki.request` value that is not a certificate to seal to."""


def request_certificate(value: str) -> x509.Certificate:
    """The certificate a node posted, checked for what sealing needs: an RSA key of 2048 bits or
    more. Its other fields are not trusted for anything; the channel is what vouches for it."""
    try:
        der = base64.b64decode(value.strip(), validate=True)
        certificate = x509.load_der_x509_certificate(der)
    except ValueError as exc:
        raise HandoffRequestError(f"{REQUEST_KEY} is not a base64 DER certificate: {exc}") from exc
    key = certificate.public_key()
    if not isinstance(key, rsa.RSAPublicKey) or key.key_size < MINIMUM_RSA_BITS:
        raise HandoffRequestError(f"{REQUEST_KEY} must carry an RSA key of {MINIMUM_RSA_BITS} bits or more")
    return certificate


def request_fingerprint(value: str) -> str:
    """`sha256:<hex>` of the posted certificate's DER: what the node answers in `RECEIVED_KEY`."""
    certificate = request_certificate(value)
    return "sha256:" + certificate.fingerprint(hashes.SHA256()).hex()


ENVELOPE_VERSION = "v1"
ENCRYPTION_KEY_LABEL = b"gpucluster pki-handoff aes-256-ctr"
MAC_KEY_LABEL = b"gpucluster pki-handoff hmac-sha256"
IV_BYTES = 16
OAEP = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA256()), algorithm=hashes.SHA256(), label=None)
"""What `openssl pkeyutl -decrypt -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256
-pkeyopt rsa_mgf1_md:sha256` opens."""
MAXIMUM_ENVELOPE_CHARS = 60_000
"""Below a GuestRPC value's 64 KiB (open-vm-tools `guest_msg_def.h`, GUESTMSG_MAX_IN_SIZE) and the
1 MB a VM's guest-set values may take in all (`tools.setInfo.sizeLimit`). A prod bundle is ~8 KB."""


def derived_keys(key: bytes) -> tuple[bytes, bytes]:
    """(AES key, HMAC key), each HMAC-SHA256(key, label): what the script's `hmac_hex` derives."""
    return (
        hmac.new(key, ENCRYPTION_KEY_LABEL, hashlib.sha256).digest(),
        hmac.new(key, MAC_KEY_LABEL, hashlib.sha256).digest(),
    )


def envelope_mac(iv_hex: str, ciphertext_b64: str, mac_key: bytes) -> str:
    """HMAC-SHA256 over `<iv hex>:<ciphertext base64>`, as the script hashes what it received."""
    return hmac.new(mac_key, f"{iv_hex}:{ciphertext_b64}".encode(), hashlib.sha256).hexdigest()


def seal_bundle(bundle: bytes, request: str) -> str:
    """The bundle sealed to the posted certificate:
    `v1.<base64 RSA-OAEP-wrapped key>.<iv hex>.<base64 AES-256-CTR ciphertext>.<HMAC hex>`.
    A fresh key each time: a new envelope for every request answered."""
    public_key = request_certificate(request).public_key()
    assert isinstance(public_key, rsa.RSAPublicKey)  # request_certificate checked it
    key = os.urandom(32)
    encryption_key, mac_key = derived_keys(key)
    iv = os.urandom(IV_BYTES)
    encryptor = Cipher(algorithms.AES(encryption_key), modes.CTR(iv)).encryptor()
    ciphertext = base64.b64encode(encryptor.update(bundle) + encryptor.finalize()).decode()
    wrapped = base64.b64encode(public_key.encrypt(key, OAEP)).decode()
    envelope = ".".join((ENVELOPE_VERSION, wrapped, iv.hex(), ciphertext, envelope_mac(iv.hex(), ciphertext, mac_key)))
    if len(envelope) > MAXIMUM_ENVELOPE_CHARS:
        raise ValueError(f"the sealed keys take {len(envelope)} characters, more than a guestinfo value carries")
    return envelope
