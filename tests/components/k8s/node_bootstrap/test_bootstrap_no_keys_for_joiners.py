"""Issue 40 item 5: no long-lived private key reaches vCenter in any node's user-data.

Played on prod's real program (three control-plane nodes) under the mocks: every VM's extraConfig
as the program registers it, which is what pulumi-vsphere writes to vCenter at create (the
ReconfigVM_Task of tests/components/vsphere/terraform_vm.py) and what the VMX then logs at
power-on. Not even the first control-plane node, which runs `kubeadm init`: its keys go to
`InitPkiDelivery`, which seals them to a key the node makes (node_bootstrap/pki_handoff.py).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from pulumi.runtime import rpc

from components.k8s.join.kubeadm_certs import SECRET_ENTRY_NAMES
from components.k8s.join.token import NODE_BOOTSTRAP_GROUP
from components.k8s.node_bootstrap import KUBEADM_CONFIG_PATH
from components.k8s.node_bootstrap.control_plane_join import (
    CONTROL_PLANE_JOIN_GROUP,
    ENCRYPTION_CONFIG_SECRET,
    derived_keys,
    mac_of,
)
from components.k8s.node_bootstrap.paths import CONTROL_PLANE_JOIN_ENV_PATH
from components.k8s.node_bootstrap.pki_handoff import BUNDLE_MEMBERS, ENCRYPTION_CONFIG_MEMBER
from stacks.environment.loader import PROJECT, config_for_runtime, read_stack_file
from stacks.tools.plan.mock_runtime import ProgramRun, RecordedResource, run_program, run_project_main
from stacks.tools.plan.mock_values import fake_outputs
from tests.components.k8s.join.kubeadm_download import decrypt_bytes
from tests.stack_fixtures import fixture_stack

ROOT = Path(__file__).resolve().parents[4]
VM = "vsphere:index/virtualMachine:VirtualMachine"
RANDOM_BYTES = "random:index/randomBytes:RandomBytes"
SECRET = "kubernetes:core/v1:Secret"
PRIVATE_KEY = "tls:index/privateKey:PrivateKey"
INIT_PKI_DELIVERY = "gpucluster:vsphere:InitPkiDelivery"


@pytest.fixture(scope="module")
def prod_run() -> ProgramRun:
    config, secret_keys = config_for_runtime(read_stack_file(fixture_stack("prod")), "test-placeholder-secret")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PULUMI_ERROR_OUTPUT_STRING", "true")
        return run_program(
            run_project_main(ROOT), project=PROJECT, stack="prod", config=config, secret_keys=secret_keys
        )


def _decoded_values(extra: dict[str, Any]) -> str:
    """Every extraConfig value as written, and decoded where it is base64 (guestinfo's encoding)."""
    texts = []
    for value in extra.values():
        texts.append(str(value))
        with contextlib.suppress(binascii.Error, UnicodeDecodeError):
            texts.append(base64.b64decode(str(value), validate=True).decode())
    return "\n".join(texts)


def _kubeadm_kinds(extra: dict[str, Any]) -> dict[str, dict[str, Any]]:
    user_data = yaml.safe_load(base64.b64decode(extra["guestinfo.userdata"]))
    (config,) = [f for f in user_data["write_files"] if f["path"] == KUBEADM_CONFIG_PATH]
    return {d["kind"]: d for d in yaml.safe_load_all(config["content"]) if d}


def _node_vms(run: ProgramRun) -> dict[str, tuple[RecordedResource, dict[str, Any]]]:
    vms = {}
    for vm in run.by_type(VM):
        extra = vm.plain_inputs().get("extraConfig") or {}
        if "guestinfo.userdata" in extra:
            vms[vm.name] = (vm, extra)
    return vms


def _encryption_keys(run: ProgramRun) -> list[str]:
    keys = [r.name for r in run.by_type(RANDOM_BYTES) if "secrets-encryption" in r.name]
    assert keys, "the stack generates its Secrets encryption keys"
    return [str(fake_outputs(RANDOM_BYTES, name, {"length": 32})["base64"]) for name in keys]


def test_prod_has_one_init_node_and_joining_control_plane_nodes(prod_run: ProgramRun) -> None:
    roles = [_role(extra) for _, extra in _node_vms(prod_run).values()]
    assert roles.count("init") == 1
    assert roles.count("control-plane") == 2
    assert roles.count("worker") >= 1


def _role(extra: dict[str, Any]) -> str:
    kinds = _kubeadm_kinds(extra)
    if "InitConfiguration" in kinds:
        return "init"
    return "control-plane" if "controlPlane" in kinds["JoinConfiguration"] else "worker"


def test_no_private_key_or_encryption_key_in_any_nodes_extra_config(prod_run: ProgramRun) -> None:
    keys = _encryption_keys(prod_run)
    leaks = []
    for name, (_, extra) in _node_vms(prod_run).items():
        text = _decoded_values(extra)
        if "PRIVATE KEY" in text:
            leaks.append(f"{name}: a PEM private key in extraConfig")
        leaks.extend(f"{name}: a Secrets encryption key in extraConfig" for key in keys if key in text)
    assert leaks == []


def test_no_private_key_in_any_vms_extra_config_not_even_the_init_nodes(prod_run: ProgramRun) -> None:
    """The init node's keys arrive sealed to a key it makes (InitPkiDelivery): not in user-data."""
    holders = [name for name, (_, extra) in _node_vms(prod_run).items() if "PRIVATE KEY" in _decoded_values(extra)]
    assert holders == []
    encryption_keys = _encryption_keys(prod_run)
    for name, (_, extra) in _node_vms(prod_run).items():
        decoded = _decoded_values(extra)
        assert not [key for key in encryption_keys if key in decoded], name


def _delivered_bundle(run: ProgramRun) -> dict[str, str]:
    """What InitPkiDelivery seals to the init node: its bundle input, secret, by member name."""
    (delivery,) = run.by_type(INIT_PKI_DELIVERY)
    assert rpc.is_rpc_secret(delivery.inputs["bundle"])
    bundle = base64.b64decode(delivery.plain_inputs()["bundle"])
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
        return {
            member.name: tar.extractfile(member).read().decode()  # type: ignore[union-attr]
            for member in tar.getmembers()
        }


def test_the_init_nodes_keys_go_to_its_own_vm_sealed(prod_run: ProgramRun) -> None:
    (delivery,) = prod_run.by_type(INIT_PKI_DELIVERY)
    init = next(vm for vm, extra in _node_vms(prod_run).values() if _role(extra) == "init")
    assert delivery.plain_inputs()["vm_name"] == init.plain_inputs()["name"]
    assert "PRIVATE KEY" in _delivered_bundle(prod_run)["ca.key"]
    assert list(_delivered_bundle(prod_run)) == list(BUNDLE_MEMBERS)


# --- what the program writes into the cluster for them instead ---------------------------------


def _files(extra: dict[str, Any]) -> dict[str, str]:
    user_data = yaml.safe_load(base64.b64decode(extra["guestinfo.userdata"]))
    return {f["path"]: f["content"] for f in user_data["write_files"]}


def _secret_named(run: ProgramRun, name: str) -> RecordedResource:
    (secret,) = [r for r in run.by_type(SECRET) if r.plain_inputs()["metadata"]["name"] == name]
    return secret


def _joining_node(run: ProgramRun) -> dict[str, Any]:
    return next(extra for _, extra in _node_vms(run).values() if _role(extra) == "control-plane")


def test_kubeadm_certs_opens_with_the_joining_nodes_certificate_key(prod_run: ProgramRun) -> None:
    join = _kubeadm_kinds(_joining_node(prod_run))["JoinConfiguration"]
    key = bytes.fromhex(join["controlPlane"]["certificateKey"])
    certs = _secret_named(prod_run, "kubeadm-certs")
    assert rpc.is_rpc_secret(certs.inputs["data"])
    data = certs.plain_inputs()["data"]
    assert sorted(data) == sorted(SECRET_ENTRY_NAMES)
    expected = {
        "ca.key": fake_outputs(PRIVATE_KEY, "bootstrap-ca-key", {})["privateKeyPem"],
        "etcd-ca.key": fake_outputs(PRIVATE_KEY, "bootstrap-etcd-ca-key", {})["privateKeyPem"],
        "sa.key": fake_outputs(PRIVATE_KEY, "bootstrap-sa-key", {})["privateKeyPem"],
        "sa.pub": fake_outputs(PRIVATE_KEY, "bootstrap-sa-key", {})["publicKeyPem"],
    }
    for name, pem in expected.items():
        assert decrypt_bytes(base64.b64decode(data[name]), key).decode() == pem, name


def test_both_secrets_are_owned_by_the_short_lived_token_and_readable_only_by_its_group(prod_run: ProgramRun) -> None:
    join = _kubeadm_kinds(_joining_node(prod_run))["JoinConfiguration"]
    token_id = join["discovery"]["bootstrapToken"]["token"].split(".")[0]
    token = _secret_named(prod_run, f"bootstrap-token-{token_id}")
    fields = {k: base64.b64decode(v).decode() for k, v in token.plain_inputs()["data"].items()}
    assert fields["expiration"] == "2026-01-01T02:00:00Z"  # mocked issue time + 2 h, kubeadm's
    assert fields["auth-extra-groups"].split(",") == [NODE_BOOTSTRAP_GROUP, CONTROL_PLANE_JOIN_GROUP]
    assert fields["usage-bootstrap-authentication"] == "true"
    for name in ("kubeadm-certs", ENCRYPTION_CONFIG_SECRET):
        (owner,) = _secret_named(prod_run, name).plain_inputs()["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Secret", f"bootstrap-token-{token_id}", True)
    (role,) = prod_run.by_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
    (rule,) = role.plain_inputs()["rules"]
    assert (rule["verbs"], sorted(rule["resourceNames"])) == (
        ["get"],
        sorted(["kubeadm-certs", ENCRYPTION_CONFIG_SECRET]),
    )
    (binding,) = prod_run.by_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
    assert [s["name"] for s in binding.plain_inputs()["subjects"]] == [CONTROL_PLANE_JOIN_GROUP]


def test_the_sealed_encryption_config_is_what_the_init_node_receives(prod_run: ProgramRun) -> None:
    joining = _joining_node(prod_run)
    settings = dict(line.split("=", 1) for line in _files(joining)[CONTROL_PLANE_JOIN_ENV_PATH].splitlines() if line)
    sealed = _secret_named(prod_run, ENCRYPTION_CONFIG_SECRET)
    assert rpc.is_rpc_secret(sealed.inputs["data"])
    data = {k: base64.b64decode(v).decode() for k, v in sealed.plain_inputs()["data"].items()}
    encryption_key, mac_key = derived_keys(settings["GPUCLUSTER_CERTIFICATE_KEY"])
    assert mac_of(data, mac_key) == data["mac"]
    decryptor = Cipher(algorithms.AES(encryption_key), modes.CTR(bytes.fromhex(data["iv"]))).decryptor()
    plain = decryptor.update(base64.b64decode(data["ciphertext"])) + decryptor.finalize()
    assert plain.decode() == _delivered_bundle(prod_run)[ENCRYPTION_CONFIG_MEMBER]
