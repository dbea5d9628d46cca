"""Golden user-data: the whole `#cloud-config` of one node per role, from a fixed cluster,
compared byte for byte with the documents committed under golden/.

A change to what nodes receive shows up in review as a diff of these files. To accept a change
on purpose, regenerate them and commit the diff with the change that caused it:

    GPUCLUSTER_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/k8s_bootstrap/test_bootstrap_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from components.k8s.node_bootstrap import ClusterNode, ClusterPki, ClusterSpec, UserDataRenderer
from tests.k8s_bootstrap.cluster_settings import PEM_FIELDS, TEST_ENCRYPTION_KEYS

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("GPUCLUSTER_UPDATE_GOLDEN") == "1"

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


@pytest.mark.parametrize("case", sorted(CASES))
def test_user_data_matches_the_golden_document(case: str) -> None:
    renderer = UserDataRenderer(SPEC, token=TOKEN, ca_cert_hash=CA_HASH, pki=PKI)
    rendered = renderer.render(CASES[case])
    golden = GOLDEN / f"{case}.user-data.yaml"
    if UPDATE:
        golden.write_text(rendered)
    assert golden.exists(), f"{golden} is missing: regenerate with GPUCLUSTER_UPDATE_GOLDEN=1 (see the docstring)"
    assert rendered == golden.read_text(), (
        f"{case}: the user-data differs from {golden.name}; if the change is intended, regenerate with "
        "GPUCLUSTER_UPDATE_GOLDEN=1 and commit the diff"
    )
