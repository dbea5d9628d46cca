"""From the stack file to the node bootstrap: the Calico mirror key and the NVIDIA runtime choice."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from components.k8s.node_bootstrap import ClusterPki, UserDataRenderer
from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, InvalidEnvironment, load_environment, read_stack_file
from stacks.wiring.kubernetes import bootstrap_args
from tests.components.k8s.node_bootstrap.cluster_settings import (
    CONTROL_PLANE_JOIN,
    HANDOFF_SIGNER_PEM,
    PEM_FIELDS,
    TEST_ENCRYPTION_KEYS,
)
from tests.stack_fixtures import fixture_stack

ROOT = Path(__file__).resolve().parents[4]
MIRROR = "https://mirror.example/calico/v3.31.3/tigera-operator.yaml"
PKI = ClusterPki(**{name: "x\n" for name in PEM_FIELDS}, secrets_encryption_keys=TEST_ENCRYPTION_KEYS)


def dev_with(**cni: str) -> ConfigView:
    view = read_stack_file(fixture_stack("dev"))
    values = copy.deepcopy(dict(view.values))
    values[ENVIRONMENT_KEY].setdefault("kubernetes", {}).setdefault("cni", {}).update(cni)
    return ConfigView(values=values, secret_keys=view.secret_keys)


def node_env(view: ConfigView, node: str) -> dict[str, str]:
    args = bootstrap_args(load_environment(view))
    renderer = UserDataRenderer(
        args,
        token="abc123.0123456789abcdef",
        ca_cert_hash="sha256:" + "a" * 64,
        control_plane_join=CONTROL_PLANE_JOIN,
        pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    )
    text = renderer.render(node)
    entry = next(e for e in yaml.safe_load(text)["write_files"] if e["path"] == "/etc/gpucluster/bootstrap.env")
    return dict(line.split("=", 1) for line in entry["content"].splitlines() if not line.startswith("#"))


def test_the_calico_manifest_mirror_reaches_the_first_control_plane_node() -> None:
    env = load_environment(dev_with(operatorManifestUrl=MIRROR))
    first = env.control_plane.nodes[0].name
    assert node_env(dev_with(operatorManifestUrl=MIRROR), first)["GPUCLUSTER_CALICO_MANIFEST"] == MIRROR
    assert "raw.githubusercontent.com" in node_env(dev_with(), first)["GPUCLUSTER_CALICO_MANIFEST"]


def test_a_calico_manifest_url_the_node_cannot_use_is_refused_with_its_key() -> None:
    with pytest.raises(InvalidEnvironment) as info:
        load_environment(dev_with(operatorManifestUrl="http://mirror.example/tigera operator.yaml"))
    assert "kubernetes.cni.operatorManifestUrl" in str(info.value)
    assert "https://" in str(info.value)


def test_gpu_workers_get_the_nvidia_handler_only_in_device_plugin_mode() -> None:
    env = load_environment(dev_with())
    assert env.gpu.mode == "device-plugin"
    assert bootstrap_args(env).configure_nvidia_runtime
    operator = env.model_copy(update={"gpu": env.gpu.model_copy(update={"mode": "gpu-operator"})})
    assert not bootstrap_args(operator).configure_nvidia_runtime


def test_the_load_balancer_sources_and_the_rdma_subnet_reach_the_firewall() -> None:
    """Issue 41 items 3-4: `kubernetes.nodeFirewall.loadBalancerSources` opens the API server to the
    load balancer; the RDMA subnet is where pods are refused (the ESXi vmknics trust it)."""
    view = read_stack_file(fixture_stack("dev"))
    values = copy.deepcopy(dict(view.values))
    kubernetes = values[ENVIRONMENT_KEY].setdefault("kubernetes", {})
    kubernetes["controlPlaneEndpoint"] = "k8s-api.dev.example.com"
    kubernetes["nodeFirewall"] = {"adminNetworks": ["172.20.0.0/16"], "loadBalancerSources": ["10.10.0.5/32"]}
    env = load_environment(ConfigView(values=values, secret_keys=view.secret_keys))
    firewall = bootstrap_args(env).node_firewall
    assert firewall is not None
    assert list(firewall.load_balancer_sources) == ["10.10.0.5/32"]
    assert list(firewall.rdma_networks) == [str(env.rdma_network.subnet)]
