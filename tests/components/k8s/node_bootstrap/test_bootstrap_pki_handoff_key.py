"""The init node's hand-off key is gone once its keys are staged (issue 51 item 9).

The node makes a key pair, posts the certificate, and opens the envelope sealed to it. From the
moment the keys are staged nothing may open another copy of that envelope (a snapshot of the VM,
guestinfo read back later): the private key goes before the node answers. Only the golden
user-data held that line; the power-cut test looked at the answer, not at the key. Here the boot is
cut just before the answer, where the staged keys exist and the answer does not yet, and nothing
under the hand-off folder may hold a private key (whatever it is named)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.vsphere.key_handoff import RECEIVED_KEY
from tests.components.k8s.node_bootstrap.test_bootstrap_script_runs import make_node

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the bootstrap script needs bash")

HANDOFF_DIR = "/var/lib/gpucluster/pki-handoff"


def test_no_private_key_of_the_handoff_is_left_once_the_keys_are_staged(tmp_path: Path) -> None:
    whole = make_node(tmp_path / "whole", "cp-1")
    assert whole.boot().returncode == 0
    answer = next(
        i
        for i, call in enumerate(whole.calls, start=1)
        if call.startswith(f"vmware-rpctool info-set {RECEIVED_KEY}")
    )
    node = make_node(tmp_path / "cut", "cp-1")
    node.cut_power_at(answer, "before")
    assert node.start().power_cut
    assert node.guestinfo(RECEIVED_KEY) is None  # not answered yet
    assert node.file("/var/lib/gpucluster/pki/ca.key").exists()  # but the keys are staged
    folder = node.file(HANDOFF_DIR)
    left = [p for p in folder.rglob("*") if p.is_file() and b"PRIVATE KEY" in p.read_bytes()] if folder.exists() else []
    assert left == [], f"the hand-off's private key outlives the staged keys: {left}"
