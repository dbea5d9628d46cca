"""The first-boot documents, parsed back: who inits, who joins, labels, taints, files, script."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from components.k8s.node_bootstrap import (
    KUBEADM_API_VERSION,
    KUBEADM_CONFIG_PATH,
    CalicoSettings,
    ClusterNode,
    ClusterPki,
    ClusterSpec,
    Taint,
    UserDataRenderer,
    bootstrap_token,
    node_role,
    render_user_data,
)
from components.k8s.node_bootstrap.paths import (
    BOOTSTRAP_DONE_MARKER,
    BOOTSTRAP_ENV_PATH,
    BOOTSTRAP_SCRIPT_PATH,
    BOOTSTRAP_UNIT_NAME,
    BOOTSTRAP_UNIT_PATH,
    BOOTSTRAP_WANTS_DROP_IN_PATH,
    MODULES_LOAD_RDMA_PATH,
    PKI_HANDOFF_SIGNER_PATH,
)
from components.k8s.node_bootstrap.user_data import dump_yaml, render_bootstrap_script
from tests.components.k8s.node_bootstrap.cluster_settings import (
    CONTROL_PLANE_JOIN,
    GPU_WORKER,
    HANDOFF_SIGNER_PEM,
    PEM_FIELDS,
    TEST_ENCRYPTION_KEYS,
    cluster_settings,
)

TOKEN = "abc123.0123456789abcdef"
CA_HASH = "sha256:" + "ab" * 32
PKI = ClusterPki(
    **{name: f"-----BEGIN TEST-----\n{name}\n-----END TEST-----\n" for name in PEM_FIELDS},
    secrets_encryption_keys=TEST_ENCRYPTION_KEYS,
)


def make_spec(**overrides: Any) -> ClusterSpec:
    extra = {
        "worker_nodes": [GPU_WORKER, ClusterNode(name="cpu-1", management_ip="10.0.0.31")],
        "search_domain": "lab.example",
        "ssh_authorized_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample ops@example"],
    }
    return ClusterSpec(**cluster_settings(**{**extra, **overrides}))


def user_data(spec: ClusterSpec, node: str) -> dict[str, Any]:
    text = render_user_data(
        spec,
        node,
        token=TOKEN,
        ca_cert_hash=CA_HASH,
        control_plane_join=CONTROL_PLANE_JOIN,
        pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    )
    assert text.startswith("#cloud-config\n")
    document = yaml.safe_load(text)
    assert isinstance(document, dict)
    return document


def files(document: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {entry["path"]: entry for entry in document["write_files"]}


def kubeadm_docs(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    content = files(document)[KUBEADM_CONFIG_PATH]["content"]
    return {doc["kind"]: doc for doc in yaml.safe_load_all(content) if doc}


def bootstrap_env(document: dict[str, Any]) -> dict[str, str]:
    """The node's settings for the script, as systemd's EnvironmentFile= reads them."""
    content = files(document)[BOOTSTRAP_ENV_PATH]["content"]
    pairs = (line.split("=", 1) for line in content.splitlines() if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


def kubelet_args(registration: dict[str, Any]) -> dict[str, str]:
    return {arg["name"]: arg["value"] for arg in registration["kubeletExtraArgs"]}


# ------------------------------------------------------------------------------------------
# Roles
# ------------------------------------------------------------------------------------------


def test_only_the_first_control_plane_node_runs_kubeadm_init() -> None:
    spec = make_spec()
    assert [node_role(spec, n.name) for n in spec.all_nodes] == [
        "init",
        "control-plane",
        "worker",
        "worker",
    ]
    for node in spec.all_nodes:
        document = user_data(spec, node.name)
        kinds = set(kubeadm_docs(document))
        env = bootstrap_env(document)
        assert env["GPUCLUSTER_ROLE"] == node_role(spec, node.name)
        if node.name == "cp-1":
            assert kinds == {"InitConfiguration", "ClusterConfiguration", "KubeletConfiguration"}
        else:
            assert kinds == {"JoinConfiguration"}
        # runcmd only starts the bootstrap unit on the first boot; the drop-in, written last,
        # makes multi-user.target want it on every boot until the script has succeeded.
        assert ["systemctl", "start", "--no-block", BOOTSTRAP_UNIT_NAME] in document["runcmd"]
        assert document["write_files"][-1]["path"] == BOOTSTRAP_WANTS_DROP_IN_PATH
        assert f"Wants={BOOTSTRAP_UNIT_NAME}" in document["write_files"][-1]["content"]
        unit = files(document)[BOOTSTRAP_UNIT_PATH]["content"]
        assert f"ExecStart={BOOTSTRAP_SCRIPT_PATH}" in unit
        assert f"EnvironmentFile={BOOTSTRAP_ENV_PATH}" in unit
        assert f"ConditionPathExists=!{BOOTSTRAP_DONE_MARKER}" in unit


def test_the_script_is_byte_identical_on_every_node() -> None:
    spec = make_spec()
    scripts = {files(user_data(spec, node.name))[BOOTSTRAP_SCRIPT_PATH]["content"] for node in spec.all_nodes}
    assert scripts == {render_bootstrap_script()}


def test_all_kubeadm_documents_use_v1beta4() -> None:
    spec = make_spec()
    for node in spec.all_nodes:
        for kind, doc in kubeadm_docs(user_data(spec, node.name)).items():
            if kind != "KubeletConfiguration":
                assert doc["apiVersion"] == KUBEADM_API_VERSION


def test_cluster_configuration_carries_version_cidrs_and_endpoint() -> None:
    cluster = kubeadm_docs(user_data(make_spec(), "cp-1"))["ClusterConfiguration"]
    assert cluster["kubernetesVersion"] == "v1.34.2"
    assert cluster["clusterName"] == "gpu"
    assert cluster["controlPlaneEndpoint"] == "10.0.0.10:6443"
    assert cluster["networking"]["podSubnet"] == "10.244.0.0/16"
    assert cluster["networking"]["serviceSubnet"] == "10.96.0.0/12"
    sans = cluster["apiServer"]["certSANs"]
    assert {"10.0.0.10", "cp-1", "cp-2", "10.0.0.11", "10.0.0.12", "cp-1.lab.example"} <= set(sans)


def test_init_configuration_creates_the_join_token_and_advertises_the_management_ip() -> None:
    init = kubeadm_docs(user_data(make_spec(), "cp-1"))["InitConfiguration"]
    (token,) = init["bootstrapTokens"]
    assert token["token"] == TOKEN
    assert token["ttl"] == "24h0m0s"
    assert set(token["usages"]) == {"signing", "authentication"}
    assert init["localAPIEndpoint"] == {"advertiseAddress": "10.0.0.11", "bindPort": 6443}
    assert init["nodeRegistration"]["name"] == "cp-1"
    assert kubelet_args(init["nodeRegistration"])["node-ip"] == "10.0.0.11"


def test_workers_join_by_token_and_ca_pin_without_a_control_plane_section() -> None:
    join = kubeadm_docs(user_data(make_spec(), "gpu-1"))["JoinConfiguration"]
    discovery = join["discovery"]["bootstrapToken"]
    assert discovery == {
        "apiServerEndpoint": "10.0.0.10:6443",
        "token": TOKEN,
        "caCertHashes": [CA_HASH],
    }
    assert "controlPlane" not in join
    assert "unsafeSkipCAVerification" not in discovery


def test_other_control_plane_nodes_join_as_control_plane_on_their_own_address() -> None:
    join = kubeadm_docs(user_data(make_spec(), "cp-2"))["JoinConfiguration"]
    assert join["controlPlane"]["localAPIEndpoint"] == {
        "advertiseAddress": "10.0.0.12",
        "bindPort": 6443,
    }
    # kubeadm downloads the shared PKI with it (issue 40 item 5): the node's user-data has none.
    assert join["controlPlane"]["certificateKey"] == CONTROL_PLANE_JOIN.certificate_key
    assert join["discovery"]["bootstrapToken"]["token"] == CONTROL_PLANE_JOIN.token


# ------------------------------------------------------------------------------------------
# Labels and taints
# ------------------------------------------------------------------------------------------


def test_gpu_worker_gets_gpu_and_rdma_labels_and_taint_when_configured() -> None:
    spec = make_spec(taint_gpu_nodes=True)
    registration = kubeadm_docs(user_data(spec, "gpu-1"))["JoinConfiguration"]["nodeRegistration"]
    args = kubelet_args(registration)
    assert args["node-ip"] == "10.0.0.21"
    labels = dict(item.split("=") for item in args["node-labels"].split(","))
    assert labels == {
        "nvidia.com/gpu.present": "true",
        "feature.node.kubernetes.io/rdma.capable": "true",
    }
    assert registration["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


def test_gpu_worker_is_not_tainted_by_default_and_cpu_worker_gets_no_gpu_label() -> None:
    spec = make_spec()
    gpu = kubeadm_docs(user_data(spec, "gpu-1"))["JoinConfiguration"]["nodeRegistration"]
    assert gpu["taints"] == []
    cpu = kubeadm_docs(user_data(spec, "cpu-1"))["JoinConfiguration"]["nodeRegistration"]
    assert "node-labels" not in kubelet_args(cpu)
    assert cpu["taints"] == []


def test_node_labels_and_taints_are_added_and_win_over_defaults() -> None:
    node = ClusterNode(
        name="gpu-1",
        management_ip="10.0.0.21",
        gpu=True,
        labels={"nvidia.com/gpu.present": "false", "example.com/rack": "r1"},
        taints=[Taint(key="example.com/maintenance", effect="NoExecute")],
    )
    spec = make_spec(worker_nodes=[node])
    registration = kubeadm_docs(user_data(spec, "gpu-1"))["JoinConfiguration"]["nodeRegistration"]
    labels = dict(i.split("=") for i in kubelet_args(registration)["node-labels"].split(","))
    assert labels == {"nvidia.com/gpu.present": "false", "example.com/rack": "r1"}
    assert registration["taints"] == [{"key": "example.com/maintenance", "effect": "NoExecute"}]


def test_control_plane_taint_is_kept_unless_scheduling_there_is_allowed() -> None:
    default = kubeadm_docs(user_data(make_spec(), "cp-1"))["InitConfiguration"]
    assert default["nodeRegistration"]["taints"] == [
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    ]
    open_spec = make_spec(schedule_on_control_plane=True)
    allowed = kubeadm_docs(user_data(open_spec, "cp-2"))["JoinConfiguration"]
    assert allowed["nodeRegistration"]["taints"] == []


# ------------------------------------------------------------------------------------------
# Files, secrets and the script
# ------------------------------------------------------------------------------------------


def test_file_modes_keep_the_token_root_only() -> None:
    cp = files(user_data(make_spec(), "cp-1"))
    for path, entry in cp.items():
        if path == KUBEADM_CONFIG_PATH:
            assert entry["permissions"] == "0600", path
        assert entry["owner"] == "root:root"
    assert cp[BOOTSTRAP_SCRIPT_PATH]["permissions"] == "0700"


@pytest.mark.parametrize("node", ["cp-1", "cp-2", "gpu-1"])
def test_no_node_receives_key_material_in_its_user_data(node: str) -> None:
    """Issue 40 item 5: not even the node that runs kubeadm init (its keys arrive sealed to a key
    it makes: pki_handoff.py). The renderer is not given them at all."""
    text = render_user_data(
        make_spec(),
        node,
        token=TOKEN,
        ca_cert_hash=CA_HASH,
        control_plane_join=CONTROL_PLANE_JOIN,
        pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    )
    assert not [path for path in files(yaml.safe_load(text)) if "/pki/" in path or "encryption" in path]
    assert "PRIVATE KEY" not in text


def test_joining_control_plane_nodes_require_their_join() -> None:
    with pytest.raises(ValueError, match="needs its control-plane join"):
        render_user_data(make_spec(), "cp-2", token=TOKEN, ca_cert_hash=CA_HASH)


def test_the_init_node_requires_the_key_handoff_signer_and_carries_its_public_half() -> None:
    """Issue 53 item 1: the init node opens no sealed keys the stack did not sign; without the
    signer's public key it could open none, so rendering it without one is refused."""
    with pytest.raises(ValueError, match=r"needs the public half of the stack's key hand-off signing key"):
        render_user_data(make_spec(), "cp-1", token=TOKEN, ca_cert_hash=CA_HASH, control_plane_join=CONTROL_PLANE_JOIN)
    document = user_data(make_spec(), "cp-1")
    entry = files(document)[PKI_HANDOFF_SIGNER_PATH]
    assert entry["content"] == HANDOFF_SIGNER_PEM
    assert entry["permissions"] == "0644"
    for other in ("cp-2", "gpu-1"):
        assert PKI_HANDOFF_SIGNER_PATH not in files(user_data(make_spec(), other))


def test_a_joining_control_plane_node_gets_no_private_key_and_no_encryption_key() -> None:
    text = render_user_data(
        make_spec(), "cp-2", token=TOKEN, ca_cert_hash=CA_HASH, control_plane_join=CONTROL_PLANE_JOIN
    )
    assert not [path for path in files(yaml.safe_load(text)) if "/pki/" in path or "encryption" in path]
    for name in PEM_FIELDS:
        assert getattr(PKI, name).strip() not in text
    for key in PKI.secrets_encryption_keys.values():
        assert key not in text
    assert TOKEN not in text  # the long-lived join token neither: the short-lived one only


def test_hostname_fqdn_and_ssh_keys() -> None:
    document = user_data(make_spec(), "cpu-1")
    assert document["hostname"] == "cpu-1"
    assert document["fqdn"] == "cpu-1.lab.example"
    assert document["ssh_authorized_keys"][0].startswith("ssh-ed25519 ")


def test_calico_installation_uses_the_pod_cidr_and_the_kubelet_node_ip() -> None:
    spec = make_spec(calico=CalicoSettings(encapsulation="IPIPCrossSubnet"))
    cp = files(user_data(spec, "cp-1"))
    (installation,) = [
        doc for doc in yaml.safe_load_all(cp["/etc/kubernetes/calico-installation.yaml"]["content"]) if doc
    ]
    network = installation["spec"]["calicoNetwork"]
    assert network["ipPools"][0]["cidr"] == "10.244.0.0/16"
    assert network["ipPools"][0]["encapsulation"] == "IPIPCrossSubnet"
    assert network["nodeAddressAutodetectionV4"] == {"kubernetes": "NodeInternalIP"}
    assert bootstrap_env(user_data(spec, "cp-1"))["GPUCLUSTER_CALICO_MANIFEST"] == (
        "https://raw.githubusercontent.com/projectcalico/calico/v3.31.3/manifests/tigera-operator.yaml"
    )


def test_calico_manifest_mirror_is_used_when_given() -> None:
    mirror = "https://mirror.example/calico/tigera-operator.yaml"
    spec = make_spec(calico=CalicoSettings(operator_manifest_url=mirror))
    assert bootstrap_env(user_data(spec, "cp-1"))["GPUCLUSTER_CALICO_MANIFEST"] == mirror
    assert "GPUCLUSTER_CALICO_MANIFEST" not in bootstrap_env(user_data(spec, "cp-2"))


def test_each_node_gets_its_role_endpoint_gpu_and_rdma_settings() -> None:
    spec = make_spec()
    assert bootstrap_env(user_data(spec, "gpu-1")) == {
        "GPUCLUSTER_ROLE": "worker",
        "GPUCLUSTER_API_ENDPOINT": "10.0.0.10:6443",
        "GPUCLUSTER_GPU": "true",
        "GPUCLUSTER_RDMA": "true",
        "GPUCLUSTER_NVIDIA_RUNTIME_HANDLER": "nvidia",
        # kubeadm's pause for the spec's minor (components/k8s/kubeadm_pins.py), no mirror
        "GPUCLUSTER_SANDBOX_IMAGE": "registry.k8s.io/pause:3.10.1",
        # containerd RELEASES.md's row for 1.34 (components/k8s/version_policy.py)
        "GPUCLUSTER_CONTAINERD_FLOORS": "2.1.3,2.0.6,1.7.28,1.6.39",
        "GPUCLUSTER_NVIDIA_TOOLKIT_MINIMUM": "1.17.8",
        "GPUCLUSTER_ROOT": "",
    }
    cpu = bootstrap_env(user_data(spec, "cpu-1"))
    assert (cpu["GPUCLUSTER_GPU"], cpu["GPUCLUSTER_RDMA"], cpu["GPUCLUSTER_NVIDIA_RUNTIME_HANDLER"]) == (
        "false",
        "false",
        "",
    )
    operator = bootstrap_env(user_data(make_spec(configure_nvidia_runtime=False), "gpu-1"))
    assert operator["GPUCLUSTER_NVIDIA_RUNTIME_HANDLER"] == ""
    assert "GPUCLUSTER_NVIDIA_TOOLKIT_MINIMUM" not in operator  # the GPU Operator's toolkit


def test_only_rdma_nodes_load_the_rdma_modules_at_boot() -> None:
    spec = make_spec()
    rdma = files(user_data(spec, "gpu-1"))[MODULES_LOAD_RDMA_PATH]["content"].split()
    assert {"ib_umad", "ib_uverbs", "rdma_ucm"} <= set(rdma)
    assert MODULES_LOAD_RDMA_PATH not in files(user_data(spec, "cpu-1"))
    assert MODULES_LOAD_RDMA_PATH not in files(user_data(spec, "cp-1"))


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is needed to syntax-check")
def test_bootstrap_script_is_valid_bash() -> None:
    result = subprocess.run(["bash", "-n"], input=render_bootstrap_script(), text=True, capture_output=True)
    assert result.returncode == 0, result.stderr


def test_ipv6_endpoint_is_bracketed() -> None:
    spec = make_spec(control_plane_endpoint="fd00::10")
    join = kubeadm_docs(user_data(spec, "gpu-1"))["JoinConfiguration"]
    assert join["discovery"]["bootstrapToken"]["apiServerEndpoint"] == "[fd00::10]:6443"


# ------------------------------------------------------------------------------------------
# Token and validation
# ------------------------------------------------------------------------------------------


def test_bootstrap_token_format() -> None:
    assert bootstrap_token("abc123", "0123456789abcdef") == TOKEN
    assert re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16}", TOKEN)
    for bad in (("ABC123", "0123456789abcdef"), ("abc12", "0123456789abcdef"), ("abc123", "x")):
        with pytest.raises(ValueError) as info:
            bootstrap_token(*bad)
        assert bad[1] not in str(info.value)  # never echo the secret part


def test_render_rejects_a_malformed_token() -> None:
    with pytest.raises(ValueError, match="bootstrap token"):
        render_user_data(make_spec(), "gpu-1", token="nope", ca_cert_hash=CA_HASH)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kubernetes_version": "1.31.5"}, "kubernetes_version: '1.31.5' is not supported by the bootstrap; use 1.32"),
        ({"kubernetes_version": "1.38.0"}, "kubernetes_version: '1.38.0' is not supported"),
        ({"kubernetes_version": "latest"}, "kubernetes_version: 'latest' is not a release"),
        ({"pod_cidr": "10.244.0.1/16"}, "pod_cidr: '10.244.0.1/16' is not a network"),
        ({"service_cidr": "10.244.128.0/20"}, "service_cidr: 10.244.128.0/20 overlaps pod_cidr"),
        (
            {
                "service_cidr": "10.0.0.0/8",
                "control_plane_nodes": [ClusterNode(name="cp-1", management_ip="192.168.1.1")],
                "worker_nodes": [],
            },
            "larger than /12",
        ),
        ({"control_plane_endpoint": "https://api.example:6443"}, "control_plane_endpoint"),
        ({"control_plane_nodes": []}, "control_plane_nodes: at least one"),
        ({"worker_nodes": [ClusterNode(name="cp-1", management_ip="10.0.0.40")]}, "node name 'cp-1' is used twice"),
        ({"worker_nodes": [ClusterNode(name="Bad_Name", management_ip="10.0.0.40")]}, "is not a lowercase DNS label"),
        (
            {"worker_nodes": [ClusterNode(name="w", management_ip="10.244.0.5")]},
            "management_ip 10.244.0.5 lies inside pod_cidr",
        ),
        (
            {
                "worker_nodes": [
                    ClusterNode(name="w", management_ip="10.0.0.40", labels={"node-role.kubernetes.io/gpu": ""})
                ]
            },
            "may not set label 'node-role.kubernetes.io/gpu'",
        ),
        (
            {
                "worker_nodes": [
                    ClusterNode(name="w", management_ip="10.0.0.40", taints=[Taint(key="a", effect="Sometimes")])
                ]
            },  # type: ignore[arg-type]
            "unknown effect 'Sometimes'",
        ),
        ({"ssh_authorized_keys": ["-----BEGIN OPENSSH PRIVATE KEY-----"]}, "this is a private key"),
        ({"calico": CalicoSettings(version="3.31")}, "calico.version"),
        (
            {"calico": CalicoSettings(operator_manifest_url="https://m.example/a b.yaml")},
            "calico.operator_manifest_url",
        ),
        ({"bootstrap_token_ttl": "1 day"}, "bootstrap_token_ttl"),
    ],
)
def test_invalid_settings_are_rejected_with_the_field_named(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        make_spec(**overrides)
    assert message in str(info.value)


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(ValueError) as info:
        make_spec(kubernetes_version="1.29.0", pod_cidr="nope", cluster_name="Bad")
    text = str(info.value)
    assert "kubernetes_version" in text and "pod_cidr" in text and "cluster_name" in text


def test_allowed_kubelet_labels_pass() -> None:
    node = ClusterNode(
        name="w",
        management_ip="10.0.0.40",
        labels={"topology.kubernetes.io/zone": "rack-a", "node.kubernetes.io/pool": "gpu"},
    )
    make_spec(worker_nodes=[node])


def test_one_renderer_for_every_node_writes_each_document_as_emitting_it_whole_would() -> None:
    spec = make_spec()
    renderer = UserDataRenderer(
        spec,
        token=TOKEN,
        ca_cert_hash=CA_HASH,
        control_plane_join=CONTROL_PLANE_JOIN,
        pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    )
    names = [node.name for node in (*spec.control_plane_nodes, *spec.worker_nodes)]
    # Twice round, so every node is also rendered after others have filled the shared entries.
    for name in names + names:
        text = renderer.render(name)
        assert text == render_user_data(
            spec,
            name,
            token=TOKEN,
            ca_cert_hash=CA_HASH,
            control_plane_join=CONTROL_PLANE_JOIN,
            pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
        )
        assert text == "#cloud-config\n" + dump_yaml(yaml.safe_load(text))
        assert yaml.safe_load(text)["hostname"] == name


def test_rdma_nodes_keep_the_kernel_name_of_the_rdma_device() -> None:
    # Issue 24, defect 6: rdma-core's default udev policy (NAME_FALLBACK) may rename vmw_pvrdma0
    # (e.g. rocep11s0); the jobs select it as NCCL_IB_HCA=vmw_pvrdma.
    spec = make_spec()
    # Same name as rdma-core's packaged rule, so it replaces it (udev(7): /etc before /usr/lib).
    path = "/etc/udev/rules.d/60-rdma-persistent-naming.rules"
    rule = files(user_data(spec, "gpu-1"))[path]["content"]
    rules = [line for line in rule.splitlines() if line and not line.startswith("#")]
    assert rules == ['ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_KERNEL"']
    assert path not in files(user_data(spec, "cpu-1"))
