"""The init node's side of the key handoff (issue 40 item 5, issue 53 items 1-3), executed: the real
bootstrap script with real openssl and GNU tar, the stand-in vmware-rpctool for the VM's guestinfo,
and the stack's answer made by the program's own sealing code (pki_responder.py). The stack's side
against vCenter is tests/components/vsphere/test_vcsim_init_pki_delivery.py."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from components.k8s.node_bootstrap.paths import ENCRYPTION_CONFIG_PATH, PKI_HANDOFF_SIGNER_PATH
from components.k8s.node_bootstrap.pki_handoff import BUNDLE_MEMBERS, pki_bundle
from components.k8s.node_bootstrap.user_data import render_bootstrap_script, render_encryption_configuration
from components.vsphere.key_handoff import ENVELOPE_KEY, ENVELOPE_VERSION, RECEIVED_KEY, REQUEST_KEY, seal_bundle
from tests.components.k8s.node_bootstrap.cluster_settings import HANDOFF_SIGNER_PEM, HANDOFF_SIGNING_KEY_PEM
from tests.components.k8s.node_bootstrap.node_harness import Node
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
    answer = next(
        i for i, call in enumerate(calls, start=1) if call.startswith(f"vmware-rpctool info-set {RECEIVED_KEY}")
    )
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
    """The script cannot import them: its guestinfo keys, envelope version, signer path and tar
    members are read back."""
    script = render_bootstrap_script()
    assert f"info-set {REQUEST_KEY} " in script
    assert f"info-set {RECEIVED_KEY} " in script
    assert f"guestinfo_get {ENVELOPE_KEY.removeprefix('guestinfo.')}" in script
    assert f'[ "$version" != {ENVELOPE_VERSION} ]' in script
    assert f"pki_handoff_signer=$root{PKI_HANDOFF_SIGNER_PATH} " in script
    (extract,) = [
        line for line in script.splitlines() if "ca.crt ca.key front-proxy-ca.crt" in line and "for " not in line
    ]
    members = [*extract.split(), "encryption-configuration.yaml"]
    assert tuple(m for m in members if m != "\\") == BUNDLE_MEMBERS


def _waiting(tmp_path: Path) -> tuple[Node, str]:
    """An init node that posted its request and gave up waiting for now (the stack withholds)."""
    node = make_node(tmp_path, "cp-1")
    node.set("withhold-pki")
    assert node.start().returncode != 0
    request = node.guestinfo(REQUEST_KEY)
    assert request
    return node, request


def _assert_nothing_staged(node: Node) -> None:
    assert not node.file("/var/lib/gpucluster/pki/ca.key").exists()
    assert not node.file("/var/lib/gpucluster/pki-handoff/open").exists()
    assert not node.file(ENCRYPTION_CONFIG_PATH).exists()
    assert node.guestinfo(RECEIVED_KEY) is None


def test_an_envelope_altered_on_the_way_is_refused_by_its_signature(tmp_path: Path) -> None:
    """Sealed to this node's key and signed by the stack, then a ciphertext byte flipped: not one
    file is staged from it."""
    node, request = _waiting(tmp_path)
    version, fingerprint, cms, signature = seal_bundle(
        pki_bundle(make_spec(), PKI), request, HANDOFF_SIGNING_KEY_PEM
    ).split(".")
    raw = base64.b64decode(cms)
    flipped = base64.b64encode(raw[:-1] + bytes([raw[-1] ^ 1])).decode()
    (node.sim / "guestinfo" / ENVELOPE_KEY).write_text(".".join((version, fingerprint, flipped, signature)))
    run = node.start()
    assert run.returncode != 0
    assert "not signed by the stack's hand-off key" in run.output
    _assert_nothing_staged(node)


def test_an_envelope_someone_else_sealed_to_this_node_is_refused_and_the_node_keeps_asking(tmp_path: Path) -> None:
    """Issue 53 item 1: anyone can read the node's certificate and seal a bundle of their own to it
    (their CA: the cluster would trust them). Signed with any key but the stack's, the node refuses
    it unopened, and takes the stack's when it comes."""
    node, request = _waiting(tmp_path)
    other = subprocess.run(
        ["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout"], check=True, capture_output=True, text=True
    ).stdout
    forged_pki = dataclasses.replace(PKI, ca_key_pem="-----BEGIN TEST-----\nforged\n-----END TEST-----\n")
    forged = seal_bundle(pki_bundle(make_spec(), forged_pki), request, other)
    (node.sim / "guestinfo" / ENVELOPE_KEY).write_text(forged)
    run = node.start()
    assert run.returncode != 0
    assert "not signed by the stack's hand-off key" in run.output
    _assert_nothing_staged(node)
    (node.sim / "withhold-pki").unlink()
    assert node.boot().returncode == 0
    assert node.file("/etc/kubernetes/pki/ca.key").read_text() == PKI.ca_key_pem


def test_the_init_node_user_data_carries_the_signers_public_half_only(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-1")
    signer = node.file(PKI_HANDOFF_SIGNER_PATH)
    assert signer.read_text() == HANDOFF_SIGNER_PEM
    assert "PRIVATE KEY" not in node.user_data
    assert HANDOFF_SIGNING_KEY_PEM.splitlines()[1] not in node.user_data


def _gnu_tar_bundle(tmp_path: Path, odd: str) -> bytes:
    """The bundle's members made on disk and packed with GNU tar, `ca.crt` replaced by a member of
    kind `odd` (a symlink to the node's /etc/shadow, a hard link to it, a fifo), or a character
    device added with Python's tarfile (making one on disk needs root)."""
    src = tmp_path / "bundle-src"
    (src / "etcd").mkdir(parents=True)
    members = {
        "ca.crt": PKI.ca_cert_pem,
        "ca.key": PKI.ca_key_pem,
        "front-proxy-ca.crt": PKI.front_proxy_ca_cert_pem,
        "front-proxy-ca.key": PKI.front_proxy_ca_key_pem,
        "etcd/ca.crt": PKI.etcd_ca_cert_pem,
        "etcd/ca.key": PKI.etcd_ca_key_pem,
        "sa.key": PKI.service_account_key_pem,
        "sa.pub": PKI.service_account_pub_pem,
        "encryption-configuration.yaml": render_encryption_configuration(make_spec(), PKI),
    }
    for name, text in members.items():
        if not (name == "ca.crt" and odd != "chardev"):
            (src / name).write_text(text)
    shadow = tmp_path / "this" / "cp-1" / "root" / "etc" / "shadow"
    if odd == "symlink":
        (src / "ca.crt").symlink_to(shadow)
    elif odd == "hardlink":
        (src / "target").write_text("x")
        os.link(src / "target", src / "ca.crt")
    elif odd == "fifo":
        os.mkfifo(src / "ca.crt")
    names = [n for n in members if n != "ca.crt" or odd != "chardev"]
    if odd == "hardlink":
        names = ["target", *names]  # the link's target first: tar stores ca.crt as a hard link to it
    packed = subprocess.run(["tar", "-czf", "-", "-C", str(src), *names], check=True, capture_output=True).stdout
    if odd != "chardev":
        return packed
    raw = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as src_tar, tarfile.open(fileobj=raw, mode="w") as out:
        for member in src_tar.getmembers():
            out.addfile(member, src_tar.extractfile(member))
        device = tarfile.TarInfo("ca.crt")
        device.type, device.devmajor, device.devminor = tarfile.CHRTYPE, 1, 3
        out.addfile(device)
    return gzip_bytes(raw.getvalue())


def gzip_bytes(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data)


@pytest.mark.parametrize("odd", ["symlink", "hardlink", "fifo", "chardev"])
def test_a_bundle_with_a_member_that_is_not_a_regular_file_is_refused_before_any_file_is_touched(
    tmp_path: Path, odd: str
) -> None:
    """Issue 53 item 2: `ca.crt` as a symlink to /etc/shadow would be made 0644 by the chmod that
    follows the extraction (GNU tar extracts the link as a link). Signed by the stack or not, the
    bundle is refused before anything is extracted, moved or chmodded."""
    node, request = _waiting(tmp_path / "this")
    shadow = node.file("/etc/shadow")
    shadow.write_text("root:$6$secret:19000::::::\n")
    shadow.chmod(0o600)
    bundle = _gnu_tar_bundle(tmp_path, odd)
    listing = subprocess.run(["tar", "-tvzf", "-"], input=bundle, check=True, capture_output=True).stdout.decode()
    assert any(
        line.startswith({"symlink": "l", "hardlink": "h", "fifo": "p", "chardev": "c"}[odd])
        for line in listing.splitlines()
    )
    (node.sim / "guestinfo" / ENVELOPE_KEY).write_text(seal_bundle(bundle, request, HANDOFF_SIGNING_KEY_PEM))
    run = node.start()
    assert run.returncode != 0
    assert "a member that is not a regular file" in run.output
    assert oct(shadow.stat().st_mode & 0o777) == "0o600"
    _assert_nothing_staged(node)


def test_no_key_is_ever_on_an_openssl_command_line(tmp_path: Path) -> None:
    """Issue 53 item 3: /proc/PID/cmdline is world-readable, so a key in openssl's arguments (`-K`,
    `-macopt hexkey:`, `-hmac`, `-pass pass:`) is any local user's. The real openssl runs behind a
    recorder of its argv for a whole hand-off, and no argument carries a key or key material."""
    node = make_node(tmp_path, "cp-1")
    real = shutil.which("openssl")
    assert real
    recorder = Path(node.path) / "openssl"
    recorder.unlink()
    recorder.write_text(f'#!/bin/bash\nprintf "%s\\n" "$*" >>"$SIM/openssl-argv"\nexec {real} "$@"\n')
    recorder.chmod(0o755)
    assert node.boot().returncode == 0
    argv = node.lines("openssl-argv")
    assert any(line.startswith("cms -decrypt") for line in argv)  # the hand-off ran through the recorder
    for line in argv:
        words = line.split()
        assert not {"-K", "-k", "-hmac", "-pass", "-passin", "-kfile"} & set(words), line
        assert "hexkey:" not in line and "key:" not in line, line
        assert not any(len(word) >= 32 and all(c in "0123456789abcdefABCDEF" for c in word) for word in words), line
