"""Issue 40 item 8: a tenant pod does not get a GPU worker's GPUs by setting NVIDIA_VISIBLE_DEVICES.

The bootstrap script runs in a temporary root with the recording stand-ins (node_harness.py); its
stand-in `nvidia-ctk config` edits the toolkit's config.toml as the real one does (top-level keys).
The toolkit's decision over the rendered file is the model in tests/components/k8s/nvidia_toolkit_double.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.k8s.node_bootstrap import ClusterPki, ClusterSpec, UserDataRenderer
from tests.components.k8s.node_bootstrap.cluster_settings import (
    HANDOFF_SIGNER_PEM,
    PEM_FIELDS,
    TEST_ENCRYPTION_KEYS,
    cluster_settings,
)
from tests.components.k8s.node_bootstrap.node_harness import Node
from tests.components.k8s.nvidia_toolkit_double import Container, ToolkitConfig, visible_devices

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the bootstrap script needs bash")

PKI = ClusterPki(
    **{name: f"-----BEGIN TEST-----\n{name}\n-----END TEST-----\n" for name in PEM_FIELDS},
    secrets_encryption_keys=TEST_ENCRYPTION_KEYS,
)
TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"


def gpu_worker(tmp_path: Path, **spec: object) -> Node:
    renderer = UserDataRenderer(
        ClusterSpec(**cluster_settings(**spec)),
        token="abc123.0123456789abcdef",
        ca_cert_hash="sha256:" + "ab" * 32,
        pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    )
    node = Node(tmp_path / "gpu-1", renderer.render("gpu-1"), "gpu-1")
    node.with_containerd()
    node.with_gpu()
    node.with_pvrdma("vmw_pvrdma0")
    node.set("api-up")
    return node


def rendered_toolkit_config(node: Node) -> ToolkitConfig:
    return ToolkitConfig.from_toml(node.file(TOOLKIT_CONFIG).read_text())


def test_a_gpu_worker_toolkit_ignores_the_envvar_from_unprivileged_containers(tmp_path: Path) -> None:
    node = gpu_worker(tmp_path)
    run = node.boot()
    assert run.returncode == 0, run.output
    text = node.file(TOOLKIT_CONFIG).read_text()
    assert "\naccept-nvidia-visible-devices-envvar-when-unprivileged = false\n" in "\n" + text
    assert "\naccept-nvidia-visible-devices-as-volume-mounts = true\n" in "\n" + text
    # The rest of the template's file is kept (its runtime section, the hooks' paths).
    assert "[nvidia-container-runtime]" in text
    config = rendered_toolkit_config(node)
    tenant = Container(env={"NVIDIA_VISIBLE_DEVICES": "all"})
    assert visible_devices(tenant, config) == [], "a tenant pod without a GPU limit got the worker's GPUs"
    # What the device plugin (volume-mounts strategy) gives a pod with `nvidia.com/gpu: 1`.
    allocated = Container(
        env={"NVIDIA_VISIBLE_DEVICES": "all"},
        mounts=[("/dev/null", "/var/run/nvidia-container-devices/GPU-00000000-0000-0000-0000-000000000000")],
    )
    assert visible_devices(allocated, config) == ["GPU-00000000-0000-0000-0000-000000000000"]
    # Set before the node joins: no pod runs under the old setting.
    calls = node.calls
    (configure,) = [i for i, call in enumerate(calls) if call.startswith("nvidia-ctk config")]
    assert configure < next(i for i, call in enumerate(calls) if call.startswith("kubeadm join"))


def test_a_template_already_set_is_left_alone_and_a_broken_write_stops_the_join(tmp_path: Path) -> None:
    node = gpu_worker(tmp_path)
    assert node.boot().returncode == 0
    again = gpu_worker(tmp_path / "again")
    again.file(TOOLKIT_CONFIG).write_text(node.file(TOOLKIT_CONFIG).read_text())
    assert again.boot().returncode == 0
    assert not again.calls_of("nvidia-ctk config")

    broken = gpu_worker(tmp_path / "broken")
    broken.set("nvidia-ctk-config-ignores-set")
    run = broken.start()
    assert run.returncode != 0
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged" in run.output
    assert not broken.lines("joins")


def test_gpu_operator_mode_leaves_the_toolkit_to_the_operator(tmp_path: Path) -> None:
    node = gpu_worker(tmp_path, configure_nvidia_runtime=False)
    assert node.boot().returncode == 0
    assert not node.calls_of("nvidia-ctk")
