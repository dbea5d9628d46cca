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
   the VM, seals the PKI bundle (components/k8s/node_bootstrap/pki_handoff.py) to it, signs the
   result and writes it to the VM as `guestinfo.gpucluster.pki.envelope` (`ReconfigVM_Task`; the
   guest reads extraConfig set on a running VM with `info-get`: govmomi issue 223). The envelope
   (`seal_bundle`): a CMS EnvelopedData with RSA-OAEP (SHA-256) key transport and AES-256-CBC
   (cms_envelope.py), the fingerprint of the certificate it answers, and an ECDSA P-256 signature
   of the stack's hand-off key over both. Only what the openssl command line opens, with every key
   in a file (`cms -decrypt -inkey`, `dgst -verify`): no key on a command line, which any local
   user reads in /proc/PID/cmdline; and only algorithms a FIPS-mode template still allows.
3. The node checks the signature with the public half its user-data carries, then the fingerprint
   (its own certificate), opens it (the script's `open_envelope`), stages the files, deletes its key
   and answers with the certificate's fingerprint in `guestinfo.gpucluster.pki.received`. The
   stack then removes the request and the envelope from the VM.

Only ciphertext and public values pass through vCenter. Once the node deleted its key, no copy of
the envelope (events, vmware.log, a backup of the .vmx) opens any more.

Who can subvert it (issue 53 item 1): whoever can write the VM's extraConfig
(VirtualMachine.Config.AdvancedConfig) and any process in the guest, root or not (open-vm-tools
issue 288), can post a certificate of their own. The stack answers one request per VM: a second
one means someone else's was there first or came later, and the delivery fails, naming the keys to
rotate, without sealing to it (pki_delivery.py). An envelope someone else wrote does not carry the
stack's signature, and the node refuses it. The clone's extraConfig clears the hand-off keys a
template or an earlier VM left (first_boot.py), so the first request is the new VM's.
docs/security.md lists it with the other actors.

This module is the channel and the sealing, without Kubernetes: what the bundle holds is
node_bootstrap/pki_handoff.py's.
"""

from __future__ import annotations

import base64

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from components.vsphere.cms_envelope import envelope_der

REQUEST_KEY = "guestinfo.gpucluster.pki.request"
"""Set by the node: base64 of its handoff certificate (DER)."""
ENVELOPE_KEY = "guestinfo.gpucluster.pki.envelope"
"""Set by the stack: the signed envelope sealed to that certificate (`seal_bundle`)."""
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


ENVELOPE_VERSION = "v2"
MAXIMUM_ENVELOPE_CHARS = 60_000
"""Below a GuestRPC value's 64 KiB (open-vm-tools `guest_msg_def.h`, GUESTMSG_MAX_IN_SIZE) and the
1 MB a VM's guest-set values may take in all (`tools.setInfo.sizeLimit`). A prod bundle is ~8 KB."""


class HandoffEnvelopeError(ValueError):
    """A `guestinfo.gpucluster.pki.envelope` value that is not in the form `seal_bundle` writes."""


def signing_key(pem: str) -> ec.EllipticCurvePrivateKey:
    """The stack's hand-off signing key (ClusterBootstrap's ECDSA P-256 `tls.PrivateKey`)."""
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"the key hand-off's signing key is not a PEM private key: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ValueError("the key hand-off's signing key must be ECDSA P-256")
    return key


def seal_bundle(bundle: bytes, request: str, signing_key_pem: str) -> str:
    """The bundle sealed to the posted certificate and signed by the stack:
    `v2.<certificate fingerprint hex>.<base64 CMS EnvelopedData>.<base64 ECDSA-SHA256 signature>`,
    the signature over everything before its own dot.

    The CMS (cms_envelope.py: RSA-OAEP-SHA256, AES-256-CBC) opens with `openssl cms -decrypt`,
    which takes the node's key from a file: no key passes a command line (issue 53 item 3). The
    signature (ECDSA P-256, `openssl dgst -sha256 -verify` with the public half from the user-data)
    is what lets the node refuse an envelope someone else wrote to its guestinfo (issue 53 item 1);
    it also covers the ciphertext, which CBC does not. The fingerprint names the one request it
    answers, so a re-run of the delivery knows which certificate got the keys. A fresh content key
    every call. Only algorithms a FIPS-mode template allows."""
    certificate = request_certificate(request)
    fingerprint = certificate.fingerprint(hashes.SHA256()).hex()
    body = ".".join((ENVELOPE_VERSION, fingerprint, base64.b64encode(envelope_der(bundle, certificate)).decode()))
    signature = signing_key(signing_key_pem).sign(body.encode(), ec.ECDSA(hashes.SHA256()))
    envelope = f"{body}.{base64.b64encode(signature).decode()}"
    if len(envelope) > MAXIMUM_ENVELOPE_CHARS:
        raise ValueError(f"the sealed keys take {len(envelope)} characters, more than a guestinfo value carries")
    return envelope


def envelope_recipient(envelope: str) -> str:
    """`sha256:<hex>` of the certificate an envelope was sealed to (what its header says; the
    delivery reads it to know which request a former run answered)."""
    parts = envelope.strip().split(".")
    if len(parts) != 4 or parts[0] != ENVELOPE_VERSION or len(parts[1]) != 64:
        raise HandoffEnvelopeError(f"{ENVELOPE_KEY} is not a {ENVELOPE_VERSION} envelope")
    try:
        bytes.fromhex(parts[1])
    except ValueError as exc:
        raise HandoffEnvelopeError(f"{ENVELOPE_KEY} names no certificate fingerprint") from exc
    return f"sha256:{parts[1]}"
