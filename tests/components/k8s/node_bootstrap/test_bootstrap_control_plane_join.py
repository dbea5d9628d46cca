"""Issue 40 item 5: a joining control-plane node gets its keys from the cluster, never from user-data.

Executed like test_bootstrap_script_runs.py (real bash, recording stand-ins), with real openssl
and this interpreter as the node's python3 (it has `cryptography`, as the template's does):
the stand-in API server serves the Secret the program's own code seals (control_plane_world.py),
and the script must check the CA against its pin, fetch with the short-lived token (never on
curl's command line), open the Secret with its certificate key and write the EncryptionConfiguration
before kubeadm join starts the API server; kubeadm join downloads the PKI (certificateKey).
"""

from __future__ import annotations

import base64
import dataclasses
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from components.k8s.join.control_plane import sealed_encryption_config_data
from components.k8s.node_bootstrap import UserDataRenderer
from components.k8s.node_bootstrap.control_plane_join import ENCRYPTION_CONFIG_SECRET, derived_keys
from components.k8s.node_bootstrap.paths import (
    CLUSTER_CA_CERT_PATH,
    CONTROL_PLANE_JOIN_ENV_PATH,
    ENCRYPTION_CONFIG_PATH,
    PKI_DIR,
)
from components.k8s.node_bootstrap.user_data import render_encryption_configuration
from tests.components.k8s.node_bootstrap.cluster_settings import CONTROL_PLANE_JOIN
from tests.components.k8s.node_bootstrap.control_plane_world import (
    secret_json,
    stack_wrote_the_secrets,
    the_token_expired,
)
from tests.components.k8s.node_bootstrap.node_harness import REPOSITORY_ROOT, Node
from tests.components.k8s.node_bootstrap.test_bootstrap_script_runs import (
    CA_HASH,
    PKI,
    TOKEN,
    assert_bootstrapped,
    make_node,
    make_spec,
)

pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("openssl") is None, reason="the bootstrap script needs bash, openssl"
)


def joined(node: Node) -> bool:
    return node.lines("joins") == ["joined"]


def test_the_joining_node_fetches_its_encryption_keys_and_downloads_its_pki(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2")
    user_data = node.user_data
    paths = [entry["path"] for entry in yaml.safe_load(user_data)["write_files"]]
    assert ENCRYPTION_CONFIG_PATH not in paths and "PRIVATE KEY" not in user_data
    for key in PKI.secrets_encryption_keys.values():
        assert key not in user_data

    assert node.boot().returncode == 0
    assert_bootstrapped(node)
    assert joined(node)
    written = node.file(ENCRYPTION_CONFIG_PATH)
    assert written.read_text() == render_encryption_configuration(make_spec(), PKI)
    assert written.stat().st_mode & 0o777 == 0o600
    assert node.lines("api-requests") == ["GET secret gpucluster-encryption-config"]
    # The file before the join that starts the API server, which reads it.
    fetch = next(i for i, c in enumerate(node.calls) if c.startswith("curl") and "/secrets/" in c)
    assert fetch < node.calls.index(next(c for c in node.calls if c.startswith("kubeadm join")))
    # The token never on a command line (any local user can read those), and gone at the end.
    assert not [c for c in node.calls if CONTROL_PLANE_JOIN.token in c]
    assert not node.file(CONTROL_PLANE_JOIN_ENV_PATH).exists()
    assert not list(node.file("/var/lib/gpucluster").glob("encryption-config.*"))
    assert node.file(f"{PKI_DIR}/etcd/ca.key").read_text() == "downloaded etcd/ca.key\n"


def test_the_fetched_file_is_the_one_the_init_node_has(tmp_path: Path) -> None:
    spec = make_spec(secrets_encryption_key_names=["key-2", "key-1"])
    pki = dataclasses.replace(
        PKI,
        secrets_encryption_keys={
            **PKI.secrets_encryption_keys,
            "key-2": "c2Vjb25kIGtleSBvZiAzMiBieXRlcyBleGFjdGx5IQ==",
        },
    )
    renderer = UserDataRenderer(spec, token=TOKEN, ca_cert_hash=CA_HASH, control_plane_join=CONTROL_PLANE_JOIN)
    node = Node(tmp_path, renderer.render("cp-2"), "cp-2")
    node.with_containerd()
    node.set("api-up")
    stack_wrote_the_secrets(node, spec, pki, CONTROL_PLANE_JOIN)
    assert node.boot().returncode == 0
    config = yaml.safe_load(node.file(ENCRYPTION_CONFIG_PATH).read_text())
    names = [k["name"] for k in config["resources"][0]["providers"][0]["secretbox"]["keys"]]
    assert names == ["key-2", "key-1"]  # the order the API server encrypts with


def test_an_expired_token_stops_the_join_until_pulumi_up_writes_the_secrets_again(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2")
    the_token_expired(node)
    run = node.start(timeout=30)
    assert run.returncode != 0
    assert not node.calls_of("kubeadm join"), "joined without the encryption keys: the API server would not start"
    assert not node.file(ENCRYPTION_CONFIG_PATH).exists()
    assert "token expired" in run.output

    stack_wrote_the_secrets(node, make_spec(), PKI, CONTROL_PLANE_JOIN)  # the next pulumi up
    assert node.boot().returncode == 0
    assert joined(node)


def test_a_ca_certificate_that_does_not_match_the_pin_gets_no_token(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2")
    other = PKI.etcd_ca_cert_pem  # not a certificate of the pinned key
    node.file(CLUSTER_CA_CERT_PATH).write_text(other)
    run = node.start(timeout=30)
    assert run.returncode != 0
    assert "does not match the CA pin" in run.output
    assert node.lines("api-requests") == []
    assert not node.calls_of("kubeadm join")


def test_a_secret_sealed_under_another_key_is_refused(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2")
    stack_wrote_the_secrets(node, make_spec(), PKI, dataclasses.replace(CONTROL_PLANE_JOIN, certificate_key="7a" * 32))
    run = node.start(timeout=30)
    assert run.returncode != 0
    assert "do not open with this node's certificate key" in run.output
    assert not node.file(ENCRYPTION_CONFIG_PATH).exists()
    assert not node.calls_of("kubeadm join")


# --- issue 53 item 3: no key on a command line (/proc/PID/cmdline is world-readable) -------------
KEY_OPTIONS = {"-K", "-k", "-hmac", "-pass", "-passin", "-kfile", "-macopt"}


def _record_argv(node: Node, tool: str, real: str, prelude: str = "") -> None:
    """`tool` on the node's PATH records its argv in $SIM/<tool>-argv, then runs `real`."""
    recorder = Path(node.path) / tool
    recorder.unlink(missing_ok=True)
    recorder.write_text(f'#!/bin/bash\n{prelude}printf "%s\\n" "$*" >>"$SIM/{tool}-argv"\nexec {real} "$@"\n')
    recorder.chmod(0o755)


def _recording_node(tmp_path: Path, *, python_lacks_cryptography: bool = False) -> Node:
    node = make_node(tmp_path, "cp-2")
    real_openssl = shutil.which("openssl")
    assert real_openssl
    _record_argv(node, "openssl", real_openssl)
    prelude = ""
    if python_lacks_cryptography:
        # A template built before python3-cryptography was in its kickstart: the module does not
        # import (a package of that name first on the path that raises as a missing one does).
        shadow = tmp_path / "no-cryptography" / "cryptography"
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'cryptography'\")\n")
        prelude = f"export PYTHONPATH={shadow.parent}:{REPOSITORY_ROOT}\n"
    _record_argv(node, "python3", sys.executable, prelude)
    return node


def _secrets_on_command_lines(node: Node) -> list[str]:
    """The recorded openssl and python3 command lines that carry a key or key material."""
    encryption_key, mac_key = derived_keys(CONTROL_PLANE_JOIN.certificate_key)
    secrets = {CONTROL_PLANE_JOIN.certificate_key, encryption_key.hex(), mac_key.hex(), CONTROL_PLANE_JOIN.token}
    found = []
    for line in node.lines("openssl-argv") + node.lines("python3-argv"):
        words = set(line.split())
        if KEY_OPTIONS & words or "key:" in line or any(secret.lower() in line.lower() for secret in secrets):
            found.append(line)
    return found


def test_a_joining_node_opens_its_encryption_keys_with_no_key_on_a_command_line(tmp_path: Path) -> None:
    """The certificate key also opens kubeadm-certs (the cluster's CA keys): it, and the keys
    derived from it, stay in 0600 files and in the memory of the one process that uses them."""
    node = _recording_node(tmp_path)
    assert node.boot().returncode == 0
    assert joined(node)
    assert node.file(ENCRYPTION_CONFIG_PATH).read_text() == render_encryption_configuration(make_spec(), PKI)
    assert _secrets_on_command_lines(node) == []
    assert node.lines("python3-argv"), "the Secret was not opened by the node's python3"
    for line in node.lines("openssl-argv") + node.lines("python3-argv"):
        assert not any(len(w) >= 32 and all(c in "0123456789abcdefABCDEF" for c in w) for w in line.split()), line


def test_a_tampered_secret_is_refused_by_its_mac(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2")
    data = sealed_encryption_config_data(make_spec(), PKI, CONTROL_PLANE_JOIN.certificate_key)
    ciphertext = bytearray(base64.b64decode(base64.b64decode(data["ciphertext"])))
    ciphertext[7] ^= 0x01  # one bit of the sealed file: CTR would turn it into one bit of the plaintext
    data["ciphertext"] = base64.b64encode(base64.b64encode(bytes(ciphertext))).decode()
    node.set(f"secret-{ENCRYPTION_CONFIG_SECRET}.json", secret_json(ENCRYPTION_CONFIG_SECRET, data))
    run = node.start(timeout=30)
    assert run.returncode != 0
    assert "do not open with this node's certificate key" in run.output
    assert not node.file(ENCRYPTION_CONFIG_PATH).exists()
    assert not list(node.file(ENCRYPTION_CONFIG_PATH).parent.glob("encryption-configuration*"))
    assert not node.calls_of("kubeadm join")


def test_a_template_without_python3_cryptography_still_joins_and_says_how_to_fix_it(tmp_path: Path) -> None:
    """Fallback: the MAC and both keys in Python as always; only AES-CTR by `openssl enc`, whose
    `-K` carries the derived AES key (it opens this Secret only, never kubeadm-certs), with a
    warning in the log naming the template's fix."""
    node = _recording_node(tmp_path, python_lacks_cryptography=True)
    run = node.boot()
    assert run.returncode == 0
    assert joined(node)
    assert node.file(ENCRYPTION_CONFIG_PATH).read_text() == render_encryption_configuration(make_spec(), PKI)
    assert "rebuild the template: it lacks python3-cryptography" in run.output
    encryption_key, _ = derived_keys(CONTROL_PLANE_JOIN.certificate_key)
    on_argv = _secrets_on_command_lines(node)
    assert on_argv and all(line.startswith("enc -d -aes-256-ctr -K ") for line in on_argv), on_argv
    assert all(encryption_key.hex() in line for line in on_argv)


def test_a_node_without_python3_stops_before_the_join_and_names_it(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2", without=("python3",))
    run = node.start(timeout=30)
    assert run.returncode != 0
    assert "python3" in run.output and "certificate key" in run.output
    assert not node.file(ENCRYPTION_CONFIG_PATH).exists()
    assert not node.calls_of("kubeadm join")


def test_el8s_platform_python_is_preferred_to_python3(tmp_path: Path) -> None:
    """EL8 always has dnf's /usr/libexec/platform-python; its python3 is an optional package."""
    node = make_node(tmp_path, "cp-2", without=("python3",))
    platform_python = node.file("/usr/libexec/platform-python")
    platform_python.parent.mkdir(parents=True)
    platform_python.write_text(f'#!/bin/bash\necho ran >>"$SIM/platform-python"\nexec {sys.executable} "$@"\n')
    platform_python.chmod(0o755)
    assert node.boot().returncode == 0
    assert node.lines("platform-python") == ["ran"]
    assert node.file(ENCRYPTION_CONFIG_PATH).read_text() == render_encryption_configuration(make_spec(), PKI)
