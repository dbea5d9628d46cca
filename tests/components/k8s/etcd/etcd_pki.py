"""A throwaway etcd CA as kubeadm makes one: member certificates naming one address, a client certificate.

kubeadm's etcd server and peer certificates (cmd/kubeadm/app/phases/certs/certlist.go,
`KubeadmCertEtcdServer`, `KubeadmCertEtcdPeer`) carry both serverAuth and clientAuth and name the
node's address plus localhost, 127.0.0.1 and ::1 (cmd/kubeadm/app/util/pkiutil/pki_helpers.go,
`getAltNames`), never another node's address. The loopback names matter on a test machine: etcd
checks a peer's certificate against the address the peer connects FROM, and members on 127.X.Y.n
connect from 127.0.0.1. The clientAuth usage matters to etcd itself:
its JSON gateway dials the member's own gRPC server with the member's server certificate as a client
certificate (etcd server/embed/serve.go, `tlsinfo.ClientConfig()`), which `--client-cert-auth` checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.components.k8s.node_bootstrap.apiserver_double import _issue, _make_ca

CLIENT_EXT = "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"


@dataclass
class EtcdPki:
    folder: Path
    ca_pem: str
    client_cert_pem: str
    client_key_pem: str
    outsider_cert_pem: str
    """From a CA etcd does not trust."""
    outsider_key_pem: str

    @property
    def ca_file(self) -> Path:
        return self.folder / "etcd-ca.crt"

    @property
    def client_files(self) -> tuple[Path, Path]:
        return self.folder / "client.crt", self.folder / "client.key"

    def server_cert(self, address: str) -> tuple[Path, Path]:
        """One certificate for the member's client and peer ports, naming its address (and loopback)."""
        name = f"server-{address}"
        if not (self.folder / f"{name}.crt").exists():
            _issue(
                self.folder,
                name,
                f"/CN={address}",
                "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth,clientAuth\n"
                f"subjectAltName=IP:{address},DNS:localhost,IP:127.0.0.1,IP:::1\n",
                ca="etcd-ca",
            )
        return self.folder / f"{name}.crt", self.folder / f"{name}.key"


def make_etcd_pki(folder: Path) -> EtcdPki:
    _make_ca(folder, "etcd-ca")
    _make_ca(folder, "other-ca")
    _issue(folder, "client", "/CN=gpucluster-etcd-member-guard", CLIENT_EXT, ca="etcd-ca")
    _issue(folder, "outsider", "/CN=gpucluster-etcd-member-guard", CLIENT_EXT, ca="other-ca")
    text = lambda name: (folder / name).read_text()  # noqa: E731
    return EtcdPki(
        folder,
        text("etcd-ca.crt"),
        text("client.crt"),
        text("client.key"),
        text("outsider.crt"),
        text("outsider.key"),
    )
