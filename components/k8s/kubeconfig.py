"""The admin kubeconfig Pulumi holds for a bootstrapped cluster: a pure rendering function.

The client certificate is made by Pulumi (see `bootstrap.py`), signed by the cluster CA that
Pulumi also made, so the kubeconfig exists before any VM boots and nobody copies
`/etc/kubernetes/admin.conf` off a control-plane node. The certificate's organisation is
`kubeadm:cluster-admins`, the group kubeadm binds to `cluster-admin` (since 1.29): unlike
`system:masters` it goes through RBAC, so it can be revoked by deleting that binding. kubeadm
creates that binding only after the API server is up, so the certificate is refused for a
while after `/readyz` first answers; `ApiServerReady` waits for it to be authorised.
"""

from __future__ import annotations

import base64

import yaml

from components.k8s.node_bootstrap.spec import host_port

ADMIN_USER = "kubernetes-admin"
"""The client certificate's CN, as in kubeadm's own admin.conf."""

ADMIN_GROUP = "kubeadm:cluster-admins"
"""The client certificate's O: bound to `cluster-admin` by `kubeadm init`."""


def api_server_url(host: str, port: int) -> str:
    """`https://host:port`, IPv6 literals in brackets."""
    return f"https://{host_port(host, port)}"


def _b64(pem: str) -> str:
    return base64.b64encode(pem.encode()).decode()


def render_kubeconfig(
    *,
    cluster_name: str,
    server: str,
    ca_cert_pem: str,
    client_cert_pem: str,
    client_key_pem: str,
    user: str = ADMIN_USER,
) -> str:
    """A self-contained kubeconfig (certificates inline) with one cluster, user and context.

    The result holds a private key: callers must keep it secret.
    """
    context = f"{user}@{cluster_name}"
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": _b64(ca_cert_pem),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(client_cert_pem),
                    "client-key-data": _b64(client_key_pem),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
