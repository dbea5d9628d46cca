"""The golden user-data cases: a fixed cluster and one node per role, and the one way to rewrite
the documents under golden/ on purpose:

    .venv/bin/python -m tests.components.k8s.node_bootstrap.golden_cases

A separate command, never the test run: a run that could rewrite the files it compares against
would pass whatever the renderer produced (issue 32). Review the diff and commit it with the change
that caused it.
"""

from __future__ import annotations

from pathlib import Path

from components.k8s.node_bootstrap import ClusterNode, ClusterPki, ClusterSpec, UserDataRenderer
from components.k8s.node_bootstrap.control_plane_join import ControlPlaneJoin
from tests.components.k8s.node_bootstrap.cluster_settings import PEM_FIELDS, TEST_ENCRYPTION_KEYS

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = ".venv/bin/python -m tests.components.k8s.node_bootstrap.golden_cases"

# Fixed, obviously fake credentials: the golden files are reviewed like code, never secret.
TOKEN = "abcdef.0123456789abcdef"
CA_HASH = "sha256:" + "0" * 64
PKI = ClusterPki(
    **{
        name: f"-----BEGIN FAKE {name.upper()}-----\nnot-a-real-key\n-----END FAKE {name.upper()}-----\n"
        for name in PEM_FIELDS
    },
    secrets_encryption_keys=TEST_ENCRYPTION_KEYS,
)
CONTROL_PLANE_JOIN = ControlPlaneJoin(
    token="cpjoin.0123456789abcdef",
    certificate_key="0" * 64,
    ca_cert_pem="-----BEGIN FAKE CERTIFICATE-----\nnot-a-real-certificate\n-----END FAKE CERTIFICATE-----\n",
)
HANDOFF_SIGNER_PEM = "-----BEGIN PUBLIC KEY-----\nnot-a-real-key\n-----END PUBLIC KEY-----\n"
"""The public half of the stack's key hand-off signing key (the init node's user-data)."""
SPEC = ClusterSpec(
    cluster_name="lab-k8s",
    kubernetes_version="1.34.2",
    pod_cidr="10.244.0.0/16",
    service_cidr="10.96.0.0/12",
    control_plane_endpoint="k8s-api.lab.example",
    control_plane_nodes=[
        ClusterNode(name="lab-cp-1", management_ip="10.10.0.11"),
        ClusterNode(name="lab-cp-2", management_ip="10.10.0.12"),
        ClusterNode(name="lab-cp-3", management_ip="10.10.0.13"),
    ],
    worker_nodes=[
        ClusterNode(name="lab-gpu-1", management_ip="10.10.0.21", rdma_ip="192.168.0.51", gpu=True),
    ],
    search_domain="lab.example",
    ssh_authorized_keys=["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGoldenGoldenGoldenGoldenGoldenGolden ops@lab"],
    taint_gpu_nodes=True,
)
CASES = {
    "control-plane-init": "lab-cp-1",
    "control-plane-join": "lab-cp-2",
    "gpu-worker": "lab-gpu-1",
}


def render(case: str) -> str:
    return UserDataRenderer(
        SPEC,
        token=TOKEN,
        ca_cert_hash=CA_HASH,
        control_plane_join=CONTROL_PLANE_JOIN,
        pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    ).render(CASES[case])


def golden_path(case: str, folder: Path = GOLDEN) -> Path:
    return folder / f"{case}.user-data.yaml"


def main() -> None:
    for case in sorted(CASES):
        path = golden_path(case)
        path.write_text(render(case))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
