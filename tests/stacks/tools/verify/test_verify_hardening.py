"""Issue 40 item 3: `python -m stacks verify` reports the API server's hardening on a running
cluster: each kube-apiserver's flags (Pod Security defaults, audit, encryption) and every Secret's
`k8s:enc:secretbox:v1:` prefix in etcd.

The flags and the CLI run against the fake kubectl (tests/components/k8s/jobs/fake_cluster_bin.py,
which answers `kubectl exec ... etcdctl` from its world); the etcd read itself, the `etcdctl`
command verify runs in the etcd pod, runs against a real etcd with kubeadm's TLS
(tests/components/k8s/etcd/etcd_real.py), holding a Secret as secretbox writes it and one as an API
server without encryption writes it (the protobuf magic `k8s\\x00`).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from components.k8s.etcd.gateway import EtcdGateway
from stacks.tools.verify.hardening import etcdctl_secrets_command, expected_flags, judge_secrets_at_rest
from tests.components.k8s.etcd.etcd_pki import make_etcd_pki
from tests.components.k8s.etcd.etcd_real import real_etcd, require_etcd
from tests.components.k8s.jobs.fake_cluster import control_plane_pods, etcd_secrets, gpu_world, install

ROOT = Path(__file__).resolve().parents[4]
PLAINTEXT_SECRET = b"k8s\x00\n\x0c\n\x02v1\x12\x06Secret\x12\x1a\n\x0bdb-password"
SECRETBOX_SECRET = b"k8s:enc:secretbox:v1:key-1:" + bytes(range(64))


def verify(tmp_path: Path, **world_changes: object) -> subprocess.CompletedProcess[str]:
    world = gpu_world()
    world.update(world_changes)
    env = install(tmp_path, world)
    return subprocess.run(
        [sys.executable, "-m", "stacks", "verify", "dev"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def test_verify_reports_the_hardening_of_every_api_server_and_of_the_secrets(tmp_path: Path) -> None:
    world = gpu_world()
    world["pods"] = [p for p in world["pods"] if p["metadata"]["namespace"] != "kube-system"]
    world["pods"] += control_plane_pods(nodes=("master",))
    result = verify(tmp_path, pods=world["pods"])
    assert "API server hardening (flags):\n  master: Pod Security defaults, audit log and Secrets encryption on" in (
        result.stdout
    )
    assert "all 2 Secrets in etcd start with k8s:enc:secretbox:v1:" in result.stdout


def test_an_api_server_without_encryption_fails_verify_naming_its_node(tmp_path: Path) -> None:
    """A control-plane node that joined reading an old stored ClusterConfiguration."""
    world = gpu_world()
    flags = {k: v for k, v in expected_flags().items() if k != "--encryption-provider-config"}
    world["pods"] += [
        p for p in control_plane_pods(flags=flags, nodes=("master-2",)) if "apiserver" in p["metadata"]["name"]
    ]
    result = verify(tmp_path, pods=world["pods"])
    assert result.returncode == 1, result.stdout + result.stderr
    assert "master-2: lacks --encryption-provider-config=/etc/kubernetes/gpucluster/" in result.stdout
    assert result.stdout.rstrip().endswith(")") and "API server hardening (flags)" in result.stdout.splitlines()[-1]


def test_a_secret_stored_in_plaintext_fails_verify_naming_it(tmp_path: Path) -> None:
    result = verify(
        tmp_path,
        etcd=etcd_secrets(**{"kube-system/a": SECRETBOX_SECRET, "training/db-password": PLAINTEXT_SECRET}),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 of 2 Secrets are not encrypted in etcd (training/db-password)" in result.stdout
    assert "kubectl get secrets --all-namespaces -o json | kubectl replace -f -" in result.stdout


def test_the_etcd_read_against_a_real_etcd(tmp_path: Path) -> None:
    """The command verify runs in the etcd pod, against a real etcd with client certificates."""
    require_etcd()
    (tmp_path / "pki").mkdir()
    (tmp_path / "etcd").mkdir()
    pki = make_etcd_pki(tmp_path / "pki")
    with real_etcd(pki, tmp_path / "etcd", ["cp-1"], settled=False) as etcd:
        etcd.wait_ready(["cp-1"])
        gateway = EtcdGateway(pki.ca_pem, pki.client_cert_pem, pki.client_key_pem)
        for key, value in (
            ("/registry/secrets/kube-system/encrypted", SECRETBOX_SECRET),
            ("/registry/secrets/training/db-password", PLAINTEXT_SECRET),
            ("/registry/configmaps/kube-system/kubeadm-config", b"k8s\x00not a secret"),
        ):
            body = {"key": base64.b64encode(key.encode()).decode(), "value": base64.b64encode(value).decode()}
            assert gateway.post(etcd.endpoint("cp-1"), "/v3/kv/put", body).status == 200
        cert, key_file = pki.client_files
        command = etcdctl_secrets_command(etcd.endpoint("cp-1"), str(pki.ca_file), str(cert), str(key_file))
        answer = subprocess.run(
            [etcd.etcdctl, *command[1:]],
            capture_output=True,
            text=True,
            env={**os.environ, "ETCDCTL_API": "3"},
            timeout=30,
        )
    assert answer.returncode == 0, answer.stderr
    verdict = judge_secrets_at_rest(json.loads(answer.stdout))
    assert not verdict.passed
    assert "1 of 2 Secrets are not encrypted in etcd (training/db-password)" in verdict.render()


@pytest.mark.parametrize("flag", sorted(expected_flags()))
def test_each_flag_is_one_the_control_plane_is_given(flag: str) -> None:
    from components.k8s.node_bootstrap.api_server import api_server_extra_args

    assert flag.removeprefix("--") in {a["name"] for a in api_server_extra_args()}
