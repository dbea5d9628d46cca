"""What the first control-plane node receives sealed to a key it made (issue 40 item 5): the
shared PKI and the API server's EncryptionConfiguration, as a tar the bootstrap script extracts
by name (files/gpucluster-bootstrap.sh, `receive_pki`). How it travels, and why so:
components/vsphere/key_handoff.py (the guestinfo channel and the sealing) and
components/vsphere/pki_delivery.py (`InitPkiDelivery`).
"""

from __future__ import annotations

import gzip
import io
import tarfile

from components.k8s.node_bootstrap.spec import ClusterPki, ClusterSpec
from components.k8s.node_bootstrap.user_data import render_encryption_configuration

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
