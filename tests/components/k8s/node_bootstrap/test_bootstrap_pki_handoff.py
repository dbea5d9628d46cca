"""The init node's side of the key handoff (issue 40 item 5), executed: the real bootstrap script
with real openssl and tar, the stand-in vmware-rpctool for the VM's guestinfo, and the stack's
answer made by the program's own sealing code (pki_responder.py). The stack's side against vCenter
is tests/components/vsphere/test_vcsim_init_pki_delivery.py."""

from __future__ import annotations

import base64
import hashlib
import shutil
from pathlib import Path

import pytest

from components.k8s.node_bootstrap.paths import ENCRYPTION_CONFIG_PATH
from components.k8s.node_bootstrap.pki_handoff import BUNDLE_MEMBERS, pki_bundle
from components.k8s.node_bootstrap.user_data import render_bootstrap_script, render_encryption_configuration
from components.vsphere.key_handoff import (
    ENCRYPTION_KEY_LABEL,
    ENVELOPE_KEY,
    MAC_KEY_LABEL,
    RECEIVED_KEY,
    REQUEST_KEY,
    seal_bundle,
)
from tests.components.k8s.node_bootstrap.test_bootstrap_script_runs import (
    PKI,
    assert_bootstrapped,
    make_node,
    make_spec,
)

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the bootstrap script needs bash")


def _fingerprint(request: str) -> str:
    return "sha256:" + hashlib.sha256(base64.b64decode(request)).hexdigest()


def test_the_init_node_asks_receives_its_keys_and_answers(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-1")
    assert node.boot().returncode == 0
    assert_bootstrapped(node)
    # kubeadm init used the stack's keys, delivered sealed, not keys from user-data.
    assert node.file("/etc/kubernetes/pki/ca.key").read_text() == PKI.ca_key_pem
    assert node.file("/etc/kubernetes/pki/sa.key").read_text() == PKI.service_account_key_pem
    encryption = node.file(ENCRYPTION_CONFIG_PATH)
    assert encryption.read_text() == render_encryption_configuration(make_spec(), PKI)
    assert oct(encryption.stat().st_mode & 0o777) == "0o600"
    request = node.guestinfo(REQUEST_KEY)
    assert request and node.guestinfo(RECEIVED_KEY) == _fingerprint(request)
    # The key the envelope opens with is gone: no copy of the envelope opens any more.
    assert not node.file("/var/lib/gpucluster/pki-handoff").exists()
    assert node.lines("deliveries")


def test_a_node_waits_for_a_late_stack_keeps_its_key_and_asks_with_the_same_certificate(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-1")
    node.set("withhold-pki")  # pulumi up has not reached InitPkiDelivery yet
    first = node.start()
    assert first.returncode != 0
    assert "no sealed keys for this node after 120 checks" in first.output
    assert not node.calls_of("kubeadm init")
    request = node.guestinfo(REQUEST_KEY)
    assert request
    (node.sim / "withhold-pki").unlink()
    assert node.boot().returncode == 0  # the unit starts it again
    assert node.guestinfo(REQUEST_KEY) == request  # the same key: an envelope sealed meanwhile still opens
    assert node.guestinfo(RECEIVED_KEY) == _fingerprint(request)
    assert node.file("/etc/kubernetes/pki/ca.key").read_text() == PKI.ca_key_pem


def test_an_envelope_for_another_certificate_does_not_open_and_the_node_keeps_asking(tmp_path: Path) -> None:
    other = make_node(tmp_path / "other", "cp-1")
    assert other.boot().returncode == 0
    stale = other.guestinfo(ENVELOPE_KEY)
    assert stale
    node = make_node(tmp_path / "this", "cp-1")
    node.set("withhold-pki")
    (node.sim / "guestinfo").mkdir(parents=True, exist_ok=True)
    (node.sim / "guestinfo" / ENVELOPE_KEY).write_text(stale)
    assert node.start().returncode != 0
    assert not node.file("/var/lib/gpucluster/pki/ca.key").exists()
    (node.sim / "withhold-pki").unlink()
    assert node.boot().returncode == 0
    assert node.file("/etc/kubernetes/pki/ca.key").read_text() == PKI.ca_key_pem


def test_a_power_cut_after_the_keys_arrived_answers_on_the_next_boot(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-1")
    # The boot is cut at the node's answer (info-set ...received): the keys are staged, unconfirmed.
    node.boot()
    calls = node.calls
    answer = next(i for i, call in enumerate(calls, start=1) if call.startswith(f"vmware-rpctool info-set {RECEIVED_KEY}"))
    fresh = make_node(tmp_path / "again", "cp-1")
    fresh.cut_power_at(answer, "before")
    assert fresh.start().power_cut
    assert fresh.guestinfo(RECEIVED_KEY) is None
    assert fresh.file("/var/lib/gpucluster/pki/ca.key").exists()
    fresh.restore_power()
    assert fresh.boot().returncode == 0
    request = fresh.guestinfo(REQUEST_KEY)
    assert request and fresh.guestinfo(RECEIVED_KEY) == _fingerprint(request)
    assert fresh.lines("deliveries") == ["delivered"]  # the keys were not asked for twice
    assert_bootstrapped(fresh)


def test_the_script_spells_the_channel_and_the_bundle_as_the_program_does() -> None:
    """The script cannot import them: its guestinfo keys, key labels and tar members are read back."""
    script = render_bootstrap_script()
    assert f"info-set {REQUEST_KEY} " in script
    assert f"info-set {RECEIVED_KEY} " in script
    assert f"guestinfo_get {ENVELOPE_KEY.removeprefix('guestinfo.')}" in script
    for label in (ENCRYPTION_KEY_LABEL, MAC_KEY_LABEL):
        assert f'"{label.decode()}"' in script
    (extract,) = [line for line in script.splitlines() if "ca.crt ca.key front-proxy-ca.crt" in line]
    members = [*extract.split(), "encryption-configuration.yaml"]
    assert tuple(m for m in members if m != "\\") == BUNDLE_MEMBERS


def test_an_envelope_altered_on_the_way_is_refused_by_its_hmac(tmp_path: Path) -> None:
    """Sealed to this node's key, then a ciphertext byte flipped: not one file is staged from it."""
    node = make_node(tmp_path, "cp-1")
    node.set("withhold-pki")
    assert node.start().returncode != 0  # posts its request, waits, gives up for now
    request = node.guestinfo(REQUEST_KEY)
    assert request
    version, wrapped, iv, ciphertext, mac = seal_bundle(pki_bundle(make_spec(), PKI), request).split(".")
    raw = base64.b64decode(ciphertext)
    flipped = base64.b64encode(bytes([raw[0] ^ 1]) + raw[1:]).decode()
    (node.sim / "guestinfo" / ENVELOPE_KEY).write_text(".".join((version, wrapped, iv, flipped, mac)))
    run = node.start()
    assert run.returncode != 0
    assert "not intact (HMAC)" in run.output
    assert not node.file("/var/lib/gpucluster/pki/ca.key").exists()
    assert node.guestinfo(RECEIVED_KEY) is None
