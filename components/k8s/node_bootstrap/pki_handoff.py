"""The first control-plane node's keys, sealed to a key made on that node: never in vCenter in
plain text (issue 40 item 5).

Every other way a key could reach the node that runs `kubeadm init` passes through the VM's
extraConfig, which any vCenter reader sees, the VMX writes into vmware.log at power-on and vCenter
keeps in its reconfigure events: there is no cluster yet whose TLS it could fetch them over. So
the node asks for them with a public key of its own, through the same guestinfo channel:

1. The bootstrap script (files/gpucluster-bootstrap.sh, `receive_pki`) makes an RSA key and a
   self-signed certificate for it under /var/lib/gpucluster (0700), and publishes the certificate
   as `guestinfo.gpucluster.pki.request` (`vmware-rpctool "info-set ..."`). A value the guest sets
   shows in the VM's `config.extraConfig` (VMware's VM Operator reads guest-set guestinfo keys from
   there: vm-operator pkg/providers/vsphere/vmlifecycle/update_status.go, its GuestInfo readiness
   probe and cloud-init's `guestinfo.local-ipv4`).
2. The stack (`InitPkiDelivery`, components/vsphere/pki_delivery.py) reads that certificate from
   the VM, seals the PKI bundle to it (CMS EnvelopedData: a fresh AES-256 key, wrapped with the
   certificate's RSA key; `cryptography`'s `PKCS7EnvelopeBuilder`) and writes the envelope to the
   VM as `guestinfo.gpucluster.pki.envelope` (`ReconfigVM_Task`; the guest reads extraConfig set
   on a running VM with `info-get`: govmomi issue 223).
3. The node opens it (`openssl cms -decrypt`), stages the files, deletes its key and answers with
   the certificate's fingerprint in `guestinfo.gpucluster.pki.received`. The stack then removes
   the request and the envelope from the VM.

Only ciphertext and public values pass through vCenter. Once the node deleted its key, no copy of
the envelope (events, vmware.log, a backup of the .vmx) opens any more.

Who can subvert it: whoever can write the VM's extraConfig (VirtualMachine.Config.AdvancedConfig)
could post their own certificate before the node does, and a process in the guest can post one
(open-vm-tools lets any user `info-set`: open-vm-tools issue 288). Both already control the node:
the first can rewrite its user-data before it boots, the second runs on the node that receives
the keys. docs/security.md lists it with the other actors.
"""

from __future__ import annotations

import base64
import gzip
import io
import tarfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.ciphers import algorithms
from cryptography.hazmat.primitives.serialization import pkcs7

from components.k8s.node_bootstrap.spec import ClusterPki, ClusterSpec
from components.k8s.node_bootstrap.user_data import render_encryption_configuration

REQUEST_KEY = "guestinfo.gpucluster.pki.request"
"""Set by the node: base64 of its handoff certificate (DER)."""
ENVELOPE_KEY = "guestinfo.gpucluster.pki.envelope"
"""Set by the stack: base64 of the CMS envelope (DER) sealed to that certificate."""
RECEIVED_KEY = "guestinfo.gpucluster.pki.received"
"""Set by the node once it staged the files: `sha256:<hex>` of the certificate it opened them with."""
HANDOFF_KEYS = (REQUEST_KEY, ENVELOPE_KEY, RECEIVED_KEY)

ENCRYPTION_CONFIG_MEMBER = "encryption-configuration.yaml"
BUNDLE_MEMBERS = (
    "ca.crt",
    "ca.key",
    "front-proxy-ca.crt",
    "front-proxy-ca.key",
    "etcd/ca.crt",
    "etcd/ca.key",
    "sa.key",
    "sa.pub",
    ENCRYPTION_CONFIG_MEMBER,
)
"""What the bundle holds, by the names the script extracts (and only those): kubeadm's names
under its pki directory, then the API server's EncryptionConfiguration."""
MINIMUM_RSA_BITS = 2048


class HandoffRequestError(ValueError):
    """A `guestinfo.gpucluster.pki.request` value that is not a certificate to seal to."""


def _members(spec: ClusterSpec, pki: ClusterPki) -> dict[str, str]:
    encryption = render_encryption_configuration(spec, pki)
    return {
        "ca.crt": pki.ca_cert_pem,
        "ca.key": pki.ca_key_pem,
        "front-proxy-ca.crt": pki.front_proxy_ca_cert_pem,
        "front-proxy-ca.key": pki.front_proxy_ca_key_pem,
        "etcd/ca.crt": pki.etcd_ca_cert_pem,
        "etcd/ca.key": pki.etcd_ca_key_pem,
        "sa.key": pki.service_account_key_pem,
        "sa.pub": pki.service_account_pub_pem,
        ENCRYPTION_CONFIG_MEMBER: encryption,
    }


def pki_bundle(spec: ClusterSpec, pki: ClusterPki) -> bytes:
    """The init node's keys as a gzip'd tar, the same bytes for the same keys (no times, owners
    or modes that vary): the delivery's input does not change from run to run."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, text in _members(spec, pki).items():
            data = text.encode() if text.endswith("\n") else (text + "\n").encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o600, 0
            tar.addfile(info, io.BytesIO(data))
    compressed = io.BytesIO()
    with gzip.GzipFile(fileobj=compressed, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return compressed.getvalue()


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


def seal_bundle(bundle: bytes, request: str) -> str:
    """The bundle sealed to the posted certificate: base64 of a DER CMS EnvelopedData (AES-256-CBC
    content key, RSA key transport), which `openssl cms -decrypt -binary -inform DER` opens."""
    envelope = (
        pkcs7.PKCS7EnvelopeBuilder()
        .set_data(bundle)
        .set_content_encryption_algorithm(algorithms.AES256)
        .add_recipient(request_certificate(request))
        .encrypt(serialization.Encoding.DER, [pkcs7.PKCS7Options.Binary])
    )
    return base64.b64encode(envelope).decode()
