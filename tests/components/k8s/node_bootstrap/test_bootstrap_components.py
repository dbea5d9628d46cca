"""ClusterBootstrap, ApiServerReady and ClusterAccess under the SDK's mock runtime."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime import rpc

from components.k8s.api.ready import ApiServerReady, ApiServerReadyArgs
from components.k8s.bootstrap import ClusterBootstrap, ClusterBootstrapArgs
from components.k8s.cluster_access import ClusterAccess, ClusterAccessArgs
from components.k8s.node_bootstrap import KUBEADM_CONFIG_PATH, ClusterNode
from components.k8s.node_bootstrap.paths import PKI_HANDOFF_SIGNER_PATH
from stacks.tools.plan.mock_runtime import ProgramRun, RecordedResource, run_program
from stacks.tools.plan.mock_values import fake_outputs
from tests.components.k8s.node_bootstrap.cluster_settings import GPU_WORKER, cluster_settings

PROJECT = "vsphere-gpu-cluster"
BOOTSTRAP = "gpucluster:kubernetes:ClusterBootstrap"
ACCESS = "gpucluster:kubernetes:ClusterAccess"
READY = "gpucluster:kubernetes:ApiServerReady"
K8S_PROVIDER = "pulumi:providers:kubernetes"


@pytest.fixture(autouse=True)
def _loud_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    # An Output turned into a string by mistake fails instead of rendering "<Output ...>".
    monkeypatch.setenv("PULUMI_ERROR_OUTPUT_STRING", "true")


def make_args(**overrides: Any) -> ClusterBootstrapArgs:
    second = ClusterNode(name="gpu-2", management_ip="10.0.0.22", rdma_ip="192.168.0.52", gpu=True)
    return ClusterBootstrapArgs(**cluster_settings(**{"worker_nodes": [GPU_WORKER, second], **overrides}))


def bootstrap_program(args: ClusterBootstrapArgs | None = None) -> ProgramRun:
    def program() -> None:
        bootstrap = ClusterBootstrap("c", args or make_args())
        pulumi.export("kubeconfig", bootstrap.kubeconfig)
        pulumi.export("caCertificatePem", bootstrap.ca_certificate_pem)
        pulumi.export("caCertHash", bootstrap.discovery_token_ca_cert_hash)
        pulumi.export("initPkiBundle", bootstrap.init_pki_bundle)
        pulumi.export("initPkiSigningKey", bootstrap.init_pki_signing_key_pem)
        pulumi.export("apiServerUrl", bootstrap.api_server_url)
        for node, user_data in bootstrap.user_data.items():
            pulumi.export(f"userData-{node}", user_data)
        pulumi.export("etcdCaCertificatePem", bootstrap.etcd_ca_certificate_pem)
        pulumi.export("etcdClientCertificatePem", bootstrap.etcd_client_certificate_pem)
        pulumi.export("etcdClientKeyPem", bootstrap.etcd_client_key_pem)

    return run_program(program, project=PROJECT, stack="test", config={}, secret_keys=[])


@pytest.fixture(scope="module")
def run() -> ProgramRun:
    return bootstrap_program()


def plain(value: Any) -> Any:
    assert rpc.is_rpc_secret(value), "expected a secret"
    return rpc.unwrap_rpc_secret(value)


def fake_pem_output(name: str, key: str) -> str:
    return str(fake_outputs("tls:index/privateKey:PrivateKey", name, {})[key])


def secret_values() -> list[str]:
    """Every secret the mocked providers hand out: key PEMs and the token's secret half."""
    keys = ["c-ca-key", "c-front-proxy-ca-key", "c-etcd-ca-key", "c-sa-key", "c-admin-key", "c-etcd-client-key"]
    keys.append("c-pki-handoff-signer")
    values = [fake_pem_output(name, "privateKeyPem") for name in keys]
    values.append(
        str(fake_outputs("random:index/randomPassword:RandomPassword", "c-token-secret", {"length": 16})["result"])
    )
    values.append(
        str(
            fake_outputs("random:index/randomBytes:RandomBytes", "c-secrets-encryption-key-1", {"length": 32})["base64"]
        )
    )
    return values


# ------------------------------------------------------------------------------------------
# Structure
# ------------------------------------------------------------------------------------------


def test_children_have_stable_role_names_and_the_component_as_parent(run: ProgramRun) -> None:
    (component,) = run.by_type(BOOTSTRAP)
    children = [r for r in run.resources if r.parent == component.urn]
    assert {(r.type, r.name) for r in children} == {
        ("tls:index/privateKey:PrivateKey", "c-ca-key"),
        ("random:index/randomBytes:RandomBytes", "c-secrets-encryption-key-1"),
        ("tls:index/selfSignedCert:SelfSignedCert", "c-ca"),
        ("tls:index/privateKey:PrivateKey", "c-front-proxy-ca-key"),
        ("tls:index/selfSignedCert:SelfSignedCert", "c-front-proxy-ca"),
        ("tls:index/privateKey:PrivateKey", "c-etcd-ca-key"),
        ("tls:index/selfSignedCert:SelfSignedCert", "c-etcd-ca"),
        ("tls:index/privateKey:PrivateKey", "c-sa-key"),
        ("tls:index/privateKey:PrivateKey", "c-pki-handoff-signer"),
        ("tls:index/privateKey:PrivateKey", "c-admin-key"),
        ("tls:index/certRequest:CertRequest", "c-admin-csr"),
        ("tls:index/locallySignedCert:LocallySignedCert", "c-admin-cert"),
        ("tls:index/privateKey:PrivateKey", "c-etcd-client-key"),
        ("tls:index/certRequest:CertRequest", "c-etcd-client-csr"),
        ("tls:index/locallySignedCert:LocallySignedCert", "c-etcd-client-cert"),
        ("random:index/randomString:RandomString", "c-token-id"),
        ("random:index/randomPassword:RandomPassword", "c-token-secret"),
        ("gpucluster:kubernetes:JoinTokenRotation", "c-token-rotation"),
        # Two control-plane nodes: the joining one's short-lived token and certificate key.
        ("random:index/randomString:RandomString", "c-cp-join-token-id"),
        ("random:index/randomPassword:RandomPassword", "c-cp-join-token-secret"),
        ("gpucluster:kubernetes:JoinTokenRotation", "c-cp-join-token-rotation"),
        ("random:index/randomBytes:RandomBytes", "c-cp-join-certificate-key"),
    }
    # The component, its children, and the gpucluster provider the rotation is served by.
    assert len(run.resources) == 2 + len(children)


def test_resources_do_not_depend_on_the_node_list() -> None:
    """Adding or reordering nodes changes user-data, never which resources exist."""
    few = bootstrap_program(make_args(worker_nodes=[]))
    many = bootstrap_program(
        make_args(worker_nodes=[ClusterNode(name=f"w-{i}", management_ip=f"10.0.0.{40 + i}") for i in range(5)])
    )
    assert {(r.type, r.name) for r in few.resources} == {(r.type, r.name) for r in many.resources}


def test_cas_are_rsa_ca_certificates_and_the_admin_cert_is_a_client_cert(
    run: ProgramRun,
) -> None:
    ca = run.named("c-ca").plain_inputs()
    assert ca["isCaCertificate"] is True
    assert ca["subject"] == {"commonName": "kubernetes"}
    assert ca["validityPeriodHours"] == 87600
    assert "cert_signing" in ca["allowedUses"]
    assert run.named("c-ca-key").plain_inputs() == {"algorithm": "RSA", "rsaBits": 2048}
    csr = run.named("c-admin-csr").plain_inputs()
    assert csr["subject"] == {"commonName": "kubernetes-admin", "organization": "kubeadm:cluster-admins"}
    cert = run.named("c-admin-cert").plain_inputs()
    assert "client_auth" in cert["allowedUses"]
    assert (cert["validityPeriodHours"], cert["earlyRenewalHours"]) == (8760, 720)
    assert cert["caCertPem"] == fake_outputs("tls:index/selfSignedCert:SelfSignedCert", "c-ca", {})["certPem"]


def test_token_parts_use_kubeadms_alphabet(run: ProgramRun) -> None:
    token_id = run.named("c-token-id").plain_inputs()
    secret = run.named("c-token-secret").plain_inputs()
    for inputs, length in ((token_id, 6), (secret, 16)):
        assert inputs["length"] == length
        assert (inputs["lower"], inputs["numeric"], inputs["upper"], inputs["special"]) == (
            True,
            True,
            False,
            False,
        )


# ------------------------------------------------------------------------------------------
# Secrets
# ------------------------------------------------------------------------------------------


def test_kubeconfig_and_user_data_are_secret(run: ProgramRun) -> None:
    assert rpc.is_rpc_secret(run.stack_outputs["kubeconfig"])
    for node in ("cp-1", "cp-2", "gpu-1", "gpu-2"):
        assert rpc.is_rpc_secret(run.stack_outputs[f"userData-{node}"]), node
    assert not rpc.is_rpc_secret(run.stack_outputs["caCertificatePem"])
    assert run.stack_outputs["apiServerUrl"] == "https://10.0.0.10:6443"


def test_private_keys_enter_resources_only_as_secrets(run: ProgramRun) -> None:
    for name in ("c-ca", "c-front-proxy-ca", "c-etcd-ca", "c-admin-csr", "c-etcd-client-csr"):
        assert rpc.is_rpc_secret(run.named(name).inputs["privateKeyPem"]), name
    for name in ("c-admin-cert", "c-etcd-client-cert"):
        assert rpc.is_rpc_secret(run.named(name).inputs["caPrivateKeyPem"]), name


def test_the_etcd_client_certificate_is_signed_by_the_etcd_ca_and_secret_in_the_outputs(run: ProgramRun) -> None:
    """What ControlPlaneMember presents to etcd (`--client-cert-auth`, trusting only the etcd CA)."""
    etcd_ca = fake_outputs("tls:index/selfSignedCert:SelfSignedCert", "c-etcd-ca", {})
    cert = run.named("c-etcd-client-cert")
    assert cert.plain_inputs()["caCertPem"] == etcd_ca["certPem"]
    assert plain(cert.inputs["caPrivateKeyPem"]) == fake_pem_output("c-etcd-ca-key", "privateKeyPem")
    assert cert.plain_inputs()["allowedUses"] == ["digital_signature", "key_encipherment", "client_auth"]
    assert run.named("c-etcd-client-csr").plain_inputs()["subject"] == {"commonName": "gpucluster-etcd-member-guard"}
    # Secret end to end: the certificate and its key leave the component only as secrets.
    assert plain(run.stack_outputs["etcdClientKeyPem"]) == fake_pem_output("c-etcd-client-key", "privateKeyPem")
    assert rpc.is_rpc_secret(run.stack_outputs["etcdClientCertificatePem"])
    assert run.stack_outputs["etcdCaCertificatePem"] == etcd_ca["certPem"]  # public, like the cluster CA


def test_no_secret_value_appears_in_redacted_inputs(run: ProgramRun) -> None:
    redacted = json.dumps([r.redacted_inputs() for r in run.resources], default=str)
    for value in secret_values():
        assert value not in redacted
        # Also not a recognisable fragment (the base64 body of a key).
        assert value.splitlines()[1 if "\n" in value else 0] not in redacted


def test_kubeconfig_uses_the_generated_ca_and_admin_certificate(run: ProgramRun) -> None:
    kubeconfig = yaml.safe_load(plain(run.stack_outputs["kubeconfig"]))
    cluster = kubeconfig["clusters"][0]["cluster"]
    assert cluster["server"] == "https://10.0.0.10:6443"
    ca_pem = fake_outputs("tls:index/selfSignedCert:SelfSignedCert", "c-ca", {})["certPem"]
    assert base64.b64decode(cluster["certificate-authority-data"]).decode() == ca_pem
    user = kubeconfig["users"][0]["user"]
    assert base64.b64decode(user["client-key-data"]).decode() == fake_pem_output("c-admin-key", "privateKeyPem")
    assert kubeconfig["current-context"] == "kubernetes-admin@gpu"


def test_user_data_carries_the_generated_token_and_the_ca_pin(run: ProgramRun) -> None:
    token_id = fake_outputs("random:index/randomString:RandomString", "c-token-id", {"length": 6})
    token_secret = fake_outputs("random:index/randomPassword:RandomPassword", "c-token-secret", {"length": 16})
    expected_token = f"{token_id['result']}.{token_secret['result']}"
    public_pem = fake_pem_output("c-ca-key", "publicKeyPem")
    der = base64.b64decode("".join(public_pem.splitlines()[1:-1]))
    expected_pin = "sha256:" + hashlib.sha256(der).hexdigest()
    assert run.stack_outputs["caCertHash"] == expected_pin

    document = yaml.safe_load(plain(run.stack_outputs["userData-gpu-1"]))
    (kubeadm_file,) = [f for f in document["write_files"] if f["path"] == KUBEADM_CONFIG_PATH]
    (join,) = [d for d in yaml.safe_load_all(kubeadm_file["content"]) if d]
    assert join["discovery"]["bootstrapToken"]["token"] == expected_token
    assert join["discovery"]["bootstrapToken"]["caCertHashes"] == [expected_pin]

    # The init node's keys are not in its user-data but in the bundle InitPkiDelivery seals to it.
    assert "PRIVATE KEY" not in plain(run.stack_outputs["userData-cp-1"])
    assert rpc.is_rpc_secret(run.stack_outputs["initPkiBundle"])
    with tarfile.open(
        fileobj=io.BytesIO(base64.b64decode(plain(run.stack_outputs["initPkiBundle"]))), mode="r:gz"
    ) as tar:
        ca_key = tar.extractfile("ca.key")
        assert ca_key is not None
        assert ca_key.read().decode() == fake_pem_output("c-ca-key", "privateKeyPem")


def test_the_key_handoff_signer_is_ecdsa_p256_its_key_secret_its_public_half_in_the_init_nodes_user_data(
    run: ProgramRun,
) -> None:
    """Issue 53 item 1: InitPkiDelivery signs with the private half (a secret output), the init
    node checks with the public half its user-data carries; no other node gets it."""
    (signer,) = [r for r in run.resources if r.name == "c-pki-handoff-signer"]
    assert signer.inputs["algorithm"] == "ECDSA"
    assert signer.inputs["ecdsaCurve"] == "P256"
    assert rpc.is_rpc_secret(run.stack_outputs["initPkiSigningKey"])
    assert plain(run.stack_outputs["initPkiSigningKey"]) == fake_pem_output("c-pki-handoff-signer", "privateKeyPem")
    files = {f["path"]: f for f in yaml.safe_load(plain(run.stack_outputs["userData-cp-1"]))["write_files"]}
    assert files[PKI_HANDOFF_SIGNER_PATH]["content"] == fake_pem_output("c-pki-handoff-signer", "publicKeyPem")
    for node in ("cp-2", "gpu-1"):
        document = yaml.safe_load(plain(run.stack_outputs[f"userData-{node}"]))
        assert PKI_HANDOFF_SIGNER_PATH not in [f["path"] for f in document["write_files"]], node


def test_invalid_args_are_rejected_before_any_resource() -> None:
    with pytest.raises(ValueError) as info:
        make_args(ca_validity_hours=100, admin_cert_validity_hours=200, pod_cidr="bad")
    assert "ca_validity_hours (100) must exceed admin_cert_validity_hours (200)" in str(info.value)
    assert "pod_cidr" in str(info.value)


# ------------------------------------------------------------------------------------------
# ApiServerReady and ClusterAccess
# ------------------------------------------------------------------------------------------


def _provider(run: ProgramRun) -> RecordedResource:
    (provider,) = run.by_type(K8S_PROVIDER)
    return provider


def test_bootstrap_mode_provider_waits_for_the_api_server() -> None:
    def program() -> None:
        bootstrap = ClusterBootstrap("c", make_args())
        ready = ApiServerReady(
            "c-api-ready",
            ApiServerReadyArgs(
                host=bootstrap.api_server_host,
                port=bootstrap.api_server_port,
                ca_certificate_pem=bootstrap.ca_certificate_pem,
                client_certificate_pem=bootstrap.admin_client_certificate_pem,
                client_key_pem=bootstrap.admin_client_key_pem,
            ),
        )
        access = ClusterAccess(
            "c-access", ClusterAccessArgs.for_bootstrap(bootstrap, [ready], cluster_identifier="gpu")
        )
        pulumi.export("accessKubeconfig", access.kubeconfig)

    run = run_program(program, project=PROJECT, stack="test", config={}, secret_keys=[])
    (ready,) = run.by_type(READY)
    ready_inputs = ready.redacted_inputs()
    assert ready_inputs["host"] == "10.0.0.10"
    assert ready_inputs["port"] == 6443
    assert ready_inputs["timeout_seconds"] == 1200
    assert ready_inputs["ca_certificate_pem"].startswith("-----BEGIN CERTIFICATE-----")
    # The readiness check authenticates as the admin: its key is the only secret input.
    assert (
        ready_inputs["client_certificate_pem"]
        == fake_outputs("tls:index/locallySignedCert:LocallySignedCert", "c-admin-cert", {})["certPem"]
    )
    assert ready_inputs["client_key_pem"] == "[secret]"
    assert ready.plain_inputs()["client_key_pem"] == fake_pem_output("c-admin-key", "privateKeyPem")
    assert [k for k, v in ready.inputs.items() if rpc.is_rpc_secret(v)] == ["client_key_pem"]

    provider = _provider(run)
    (access,) = run.by_type(ACCESS)
    assert provider.parent == access.urn
    assert ready.urn in provider.dependencies
    assert rpc.is_rpc_secret(provider.inputs["kubeconfig"])
    assert provider.redacted_inputs()["kubeconfig"] == "[secret]"
    assert provider.plain_inputs()["enableServerSideApply"] in (True, "true")
    assert provider.plain_inputs()["clusterIdentifier"] == "gpu"
    assert rpc.is_rpc_secret(run.stack_outputs["accessKubeconfig"])
    kubeconfig = yaml.safe_load(provider.plain_inputs()["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://10.0.0.10:6443"


def test_existing_cluster_mode_uses_the_given_kubeconfig() -> None:
    given = "apiVersion: v1\nkind: Config\nclusters: []\n# existing-cluster-marker\n"

    def program() -> None:
        kubeconfig = pulumi.Config().require_secret("kubeconfig")
        access = ClusterAccess(
            "existing",
            ClusterAccessArgs.for_existing_cluster(kubeconfig, cluster_identifier="prod-gpu"),
        )
        pulumi.export("kubeconfig", access.kubeconfig)

    run = run_program(
        program,
        project=PROJECT,
        stack="test",
        config={f"{PROJECT}:kubeconfig": given},
        secret_keys=[f"{PROJECT}:kubeconfig"],
    )
    provider = _provider(run)
    assert rpc.is_rpc_secret(provider.inputs["kubeconfig"])
    assert provider.plain_inputs()["kubeconfig"] == given
    assert provider.plain_inputs()["clusterIdentifier"] == "prod-gpu"
    assert provider.dependencies == []
    assert given not in json.dumps([r.redacted_inputs() for r in run.resources], default=str)
    assert not run.by_type(BOOTSTRAP) and not run.by_type(READY)


def test_a_plain_kubeconfig_is_made_secret() -> None:
    def program() -> None:
        ClusterAccess(
            "plain",
            ClusterAccessArgs.for_existing_cluster("apiVersion: v1", cluster_identifier="x"),
        )

    run = run_program(program, project=PROJECT, stack="test", config={}, secret_keys=[])
    assert rpc.is_rpc_secret(_provider(run).inputs["kubeconfig"])


def test_cluster_identifier_is_required() -> None:
    with pytest.raises(ValueError, match="cluster_identifier"):
        ClusterAccessArgs(kubeconfig="x", cluster_identifier="")
