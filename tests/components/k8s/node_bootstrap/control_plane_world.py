"""The cluster as a joining control-plane node finds it: what the stack wrote before it booted
(components/k8s/join/control_plane.py), served by the stand-in curl and kubeadm (standins/standin.sh).

- `$SIM/cluster-ca.crt`: the CA the API server's certificate chains to (curl's --cacert must match);
- `$SIM/control-plane-join-token`: the token the API server accepts for the two Secrets (RBAC);
- `$SIM/secret-gpucluster-encryption-config.json`: that Secret as kube-apiserver returns it, its
  data made by the program's own code (`sealed_encryption_config_data`), so the script's opening
  (Python, or openssl on a template without python3-cryptography) opens exactly what the stack writes;
- `$SIM/kubeadm-certs`: the certificate key the kubeadm-certs Secret was encrypted with (the
  Secret's format is checked against kubeadm's own decrypt in tests/components/k8s/join).
"""

from __future__ import annotations

import json

from components.k8s.join.control_plane import sealed_encryption_config_data
from components.k8s.node_bootstrap import ClusterPki, ClusterSpec
from components.k8s.node_bootstrap.control_plane_join import ENCRYPTION_CONFIG_SECRET, ControlPlaneJoin
from tests.components.k8s.node_bootstrap.node_harness import Node


def secret_json(name: str, data: dict[str, str]) -> str:
    """A Secret as kube-apiserver's GET returns it: compact JSON, one line."""
    body = {
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": "kube-system", "uid": "0a1b2c3d"},
        "data": data,
        "type": "Opaque",
    }
    return json.dumps(body, separators=(",", ":")) + "\n"


def stack_wrote_the_secrets(node: Node, spec: ClusterSpec, pki: ClusterPki, join: ControlPlaneJoin) -> None:
    (node.sim / "cluster-ca.crt").write_text(join.ca_cert_pem)
    node.set("control-plane-join-token", join.token)
    data = sealed_encryption_config_data(spec, pki, join.certificate_key)
    node.set(f"secret-{ENCRYPTION_CONFIG_SECRET}.json", secret_json(ENCRYPTION_CONFIG_SECRET, data))
    node.set("kubeadm-certs", join.certificate_key)


def the_token_expired(node: Node) -> None:
    """tokencleaner deleted the token's Secret; the garbage collector took the two it owns."""
    for name in (f"secret-{ENCRYPTION_CONFIG_SECRET}.json", "kubeadm-certs", "control-plane-join-token"):
        (node.sim / name).unlink(missing_ok=True)
