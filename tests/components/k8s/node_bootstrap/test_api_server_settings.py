"""Issue 37 items 3 and 4: the API server's Pod Security defaults, audit log and Secrets encryption,
as the control-plane nodes' user-data lays them down and kubeadm's ClusterConfiguration wires them.

The audit policy is judged by its own rule semantics (the first rule that matches a request sets
its level: k8s.io/apiserver pkg/audit/policy/checker.go), so "Secrets are never logged with a body"
is checked against every rule, not against one example.
"""

from __future__ import annotations

import base64
import fnmatch
import io
import tarfile
from typing import Any

import pytest
import yaml

from components.k8s.node_bootstrap import ClusterPki, ClusterSpec, UserDataRenderer
from components.k8s.node_bootstrap.paths import (
    ADMISSION_CONFIG_PATH,
    API_SERVER_CONFIG_DIR,
    AUDIT_LOG_DIR,
    AUDIT_POLICY_PATH,
    ENCRYPTION_CONFIG_PATH,
    KUBEADM_CONFIG_PATH,
)
from components.k8s.node_bootstrap.pki_handoff import ENCRYPTION_CONFIG_MEMBER, pki_bundle
from tests.components.k8s.node_bootstrap.cluster_settings import (
    CONTROL_PLANE_JOIN,
    HANDOFF_SIGNER_PEM,
    PEM_FIELDS,
    TEST_ENCRYPTION_KEYS,
    cluster_settings,
)

TOKEN = "abcdef.0123456789abcdef"
CA_HASH = "sha256:" + "0" * 64
KEY_2 = base64.b64encode(bytes(range(32, 64))).decode()


def pki(keys: dict[str, str] | None = None) -> ClusterPki:
    pems = {name: f"-----BEGIN TEST-----\n{name}\n-----END TEST-----\n" for name in PEM_FIELDS}
    return ClusterPki(**pems, secrets_encryption_keys=keys if keys is not None else TEST_ENCRYPTION_KEYS)


def files(node: str, spec: ClusterSpec | None = None, keys: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    renderer = UserDataRenderer(
        spec or ClusterSpec(**cluster_settings()),
        token=TOKEN,
        ca_cert_hash=CA_HASH,
        control_plane_join=CONTROL_PLANE_JOIN,
        pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    )
    document = yaml.safe_load(renderer.render(node))
    return {entry["path"]: entry for entry in document["write_files"]}


def cluster_configuration(node: str = "cp-1") -> dict[str, Any]:
    documents = yaml.safe_load_all(files(node)[KUBEADM_CONFIG_PATH]["content"])
    [cluster] = [d for d in documents if d["kind"] == "ClusterConfiguration"]
    return cluster


def encryption(spec: ClusterSpec | None = None, keys: dict[str, str] | None = None) -> dict[str, Any]:
    """The EncryptionConfiguration the init node receives sealed (pki_handoff.py), 0600 in the bundle."""
    bundle = pki_bundle(spec or ClusterSpec(**cluster_settings()), pki(keys))
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
        member = tar.getmember(ENCRYPTION_CONFIG_MEMBER)
        assert member.mode == 0o600
        extracted = tar.extractfile(member)
        assert extracted is not None
        return yaml.safe_load(extracted.read())


# --- Secrets encryption (item 4) --------------------------------------------------------------
def test_control_plane_nodes_encrypt_secrets_with_the_stacks_key() -> None:
    config = encryption()
    assert config["apiVersion"] == "apiserver.config.k8s.io/v1" and config["kind"] == "EncryptionConfiguration"
    # The init node receives it sealed, a joining control-plane node fetches the same file (issue
    # 40 item 5): none in any user-data.
    assert ENCRYPTION_CONFIG_PATH not in files("cp-1")
    assert ENCRYPTION_CONFIG_PATH not in files("cp-2")
    [resource] = config["resources"]
    assert resource["resources"] == ["secrets"]
    secretbox, identity = resource["providers"]
    assert identity == {"identity": {}}  # last: Secrets written before stay readable
    [key] = secretbox["secretbox"]["keys"]
    assert key == {"name": "key-1", "secret": TEST_ENCRYPTION_KEYS["key-1"]}
    assert len(base64.b64decode(key["secret"])) == 32
    assert ENCRYPTION_CONFIG_PATH not in files("gpu-1")  # workers carry no key


def test_rotation_lists_keys_in_the_stacks_order_first_one_encrypts() -> None:
    keys = {**TEST_ENCRYPTION_KEYS, "key-2": KEY_2}
    added = ClusterSpec(**cluster_settings(secrets_encryption_key_names=["key-1", "key-2"]))
    names = [k["name"] for k in encryption(spec=added, keys=keys)["resources"][0]["providers"][0]["secretbox"]["keys"]]
    assert names == ["key-1", "key-2"]
    promoted = ClusterSpec(**cluster_settings(secrets_encryption_key_names=["key-2", "key-1"]))
    names = [
        k["name"] for k in encryption(spec=promoted, keys=keys)["resources"][0]["providers"][0]["secretbox"]["keys"]
    ]
    assert names == ["key-2", "key-1"]


def test_a_key_name_without_key_material_is_refused() -> None:
    spec = ClusterSpec(**cluster_settings(secrets_encryption_key_names=["key-1", "key-2"]))
    with pytest.raises(ValueError, match="key-2"):
        encryption(spec=spec)


@pytest.mark.parametrize(
    ("names", "says"),
    [([], "at least one key name"), (["Key_1"], "not lowercase DNS labels"), (["a", "a"], "more than once")],
)
def test_bad_key_names_are_refused_naming_the_field(names: list[str], says: str) -> None:
    with pytest.raises(ValueError, match=f"secrets_encryption_key_names: .*{says}"):
        ClusterSpec(**cluster_settings(secrets_encryption_key_names=names))


# --- kubeadm wiring ---------------------------------------------------------------------------
def test_the_api_server_reads_every_file_from_a_mounted_directory() -> None:
    api_server = cluster_configuration()["apiServer"]
    args = {a["name"]: a["value"] for a in api_server["extraArgs"]}
    assert args["encryption-provider-config"] == ENCRYPTION_CONFIG_PATH
    assert args["admission-control-config-file"] == ADMISSION_CONFIG_PATH
    assert args["audit-policy-file"] == AUDIT_POLICY_PATH
    assert args["audit-log-path"].startswith(AUDIT_LOG_DIR + "/")
    for flag in ("audit-log-maxage", "audit-log-maxbackup", "audit-log-maxsize"):
        assert int(args[flag]) > 0, flag  # the API server rotates its own log
    mounts = {v["mountPath"]: v for v in api_server["extraVolumes"]}
    assert mounts[API_SERVER_CONFIG_DIR]["readOnly"] is True
    assert mounts[API_SERVER_CONFIG_DIR]["hostPath"] == API_SERVER_CONFIG_DIR
    assert mounts[AUDIT_LOG_DIR]["readOnly"] is False
    # Every control-plane node has the files (joining nodes read this configuration back); the
    # joining ones fetch the encryption settings before kubeadm join (test_bootstrap_control_plane_join.py).
    for node in ("cp-1", "cp-2"):
        written = files(node)
        for path in (ADMISSION_CONFIG_PATH, AUDIT_POLICY_PATH):
            assert path in written and path.startswith(API_SERVER_CONFIG_DIR + "/"), (node, path)


# --- Pod Security defaults (item 3) -----------------------------------------------------------
def test_namespaces_without_labels_enforce_baseline() -> None:
    config = yaml.safe_load(files("cp-1")[ADMISSION_CONFIG_PATH]["content"])
    assert config["apiVersion"] == "apiserver.config.k8s.io/v1" and config["kind"] == "AdmissionConfiguration"
    [plugin] = config["plugins"]
    assert plugin["name"] == "PodSecurity"
    settings = plugin["configuration"]
    assert settings["apiVersion"] == "pod-security.admission.config.k8s.io/v1"
    assert settings["defaults"]["enforce"] == "baseline"
    assert settings["defaults"]["warn"] == settings["defaults"]["audit"] == "restricted"
    # Exempt only what must run privileged before any stack add-on exists (kube-proxy, Calico).
    assert settings["exemptions"] == {
        "usernames": [],
        "runtimeClasses": [],
        "namespaces": ["kube-system", "tigera-operator", "calico-system"],
    }


# --- audit policy (item 4) --------------------------------------------------------------------
def audit_level(
    policy: dict[str, Any],
    *,
    verb: str,
    group: str = "",
    resource: str = "",
    path: str = "",
    namespace: str = "",
    name: str = "",
) -> str:
    """The level the API server gives a request: the first rule whose verbs, namespaces, resources
    (with their resourceNames) and nonResourceURLs all match; an omitted list matches anything
    (k8s.io/apiserver pkg/audit/policy/checker.go, ruleMatches and ruleMatchesResource)."""
    for rule in policy["rules"]:
        if "verbs" in rule and verb not in rule["verbs"]:
            continue
        if rule.get("namespaces") and (path or namespace not in rule["namespaces"]):
            continue
        if path:
            if "resources" in rule or not any(fnmatch.fnmatch(path, url) for url in rule.get("nonResourceURLs", ["*"])):
                continue
        else:
            if "nonResourceURLs" in rule:
                continue
            if "resources" in rule and not any(
                r.get("group", "") == group
                and (not r.get("resources") or resource in r["resources"])
                and (not r.get("resourceNames") or name in r["resourceNames"])
                for r in rule["resources"]
            ):
                continue
        return str(rule["level"])
    return "None"


@pytest.mark.parametrize("verb", ["get", "list", "watch", "create", "update", "patch", "delete"])
def test_secret_access_is_audited_without_bodies(verb: str) -> None:
    policy = yaml.safe_load(files("cp-1")[AUDIT_POLICY_PATH]["content"])
    assert policy["apiVersion"] == "audit.k8s.io/v1" and policy["kind"] == "Policy"
    for resource in ("secrets", "configmaps", "serviceaccounts/token"):
        assert audit_level(policy, verb=verb, resource=resource) == "Metadata", (verb, resource)


def test_exec_attach_and_port_forward_are_audited() -> None:
    policy = yaml.safe_load(files("cp-1")[AUDIT_POLICY_PATH]["content"])
    for resource in ("pods/exec", "pods/attach", "pods/portforward", "nodes/proxy"):
        assert audit_level(policy, verb="create", resource=resource) == "Metadata", resource
        assert audit_level(policy, verb="get", resource=resource) == "Metadata", resource
    assert audit_level(policy, verb="get", path="/readyz") == "None"
    assert audit_level(policy, verb="create", group="rbac.authorization.k8s.io", resource="clusterrolebindings") == (
        "Request"
    )


def test_no_rule_logs_a_body_of_anything_that_may_hold_a_secret() -> None:
    """A rule at Request or RequestResponse that could match core Secrets, ConfigMaps or tokens
    would write their values into the log, whatever came before it."""
    policy = yaml.safe_load(files("cp-1")[AUDIT_POLICY_PATH]["content"])
    for rule in policy["rules"]:
        if rule["level"] not in ("Request", "RequestResponse"):
            continue
        assert "resources" in rule, rule
        for selector in rule["resources"]:
            # The core group only for namespaces, whose bodies hold labels and annotations, and for
            # kubeadm's ClusterConfiguration, by name, in kube-system.
            kubeadm_config = (
                selector.get("resources") == ["configmaps"]
                and selector.get("resourceNames") == ["kubeadm-config"]
                and rule.get("namespaces") == ["kube-system"]
            )
            assert selector.get("group", "") != "" or selector.get("resources") == ["namespaces"] or kubeadm_config, rule


# Issue 40 item 10: changes that loosen admission are logged with their body, so the log shows
# what the policy, webhook or label became, not only that someone touched it.
@pytest.mark.parametrize(
    ("group", "resource"),
    [
        ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("", "namespaces"),  # a `pod-security.kubernetes.io/*` relabel is an update of the namespace
        ("certificates.k8s.io", "certificatesigningrequests/approval"),
        ("certificates.k8s.io", "certificatesigningrequests"),  # issue 53 item 10: a new CSR's names and signer
    ],
)
@pytest.mark.parametrize("verb", ["create", "update", "patch", "delete"])
def test_admission_and_certificate_changes_are_audited_with_their_body(group: str, resource: str, verb: str) -> None:
    policy = yaml.safe_load(files("cp-1")[AUDIT_POLICY_PATH]["content"])
    assert audit_level(policy, verb=verb, group=group, resource=resource) == "Request", (verb, group, resource)
    # Reading them stays at Metadata: the bodies of reads say nothing about who changed what.
    assert audit_level(policy, verb="get", group=group, resource=resource) == "Metadata", (group, resource)


@pytest.mark.parametrize("verb", ["update", "patch", "delete"])
def test_kubeadms_cluster_configuration_changes_are_audited_with_their_body(verb: str) -> None:
    """Issue 53 item 10: `kube-system/kubeadm-config` was logged at Metadata like any ConfigMap."""
    policy = yaml.safe_load(files("cp-1")[AUDIT_POLICY_PATH]["content"])
    kubeadm_config = {"resource": "configmaps", "namespace": "kube-system", "name": "kubeadm-config"}
    assert audit_level(policy, verb=verb, **kubeadm_config) == "Request"
    assert audit_level(policy, verb="get", **kubeadm_config) == "Metadata"
    # Any other ConfigMap, and one of that name elsewhere, keep Metadata: they may hold anything.
    assert audit_level(policy, verb=verb, resource="configmaps", namespace="kube-system", name="coredns") == "Metadata"
    assert audit_level(policy, verb=verb, resource="configmaps", namespace="training", name="kubeadm-config") == "Metadata"
