"""The bootstrap's containerd step against the REAL containerd: its default config, its config dump.

A GPU worker boots (node_harness) with `/etc/containerd/config.toml` as the real
`containerd config default` writes it, and the real `containerd` answers the script's
`containerd --config F config dump` (the only containerd command the script runs; it starts no
daemon). nvidia-ctk stays a stand-in (it needs the NVIDIA toolkit): it writes the drop-in and adds
its directory to the main config's `imports`, as nvidia-ctk >= 1.18 does. containerd 1.6 (Debian
12) writes and reads config version 2 only; version 3 is containerd 2.x's, and no installed binary
gives one, so version 3 stays covered by the stand-in tests alone.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from components.k8s.gpu_runtime import NVIDIA_RUNTIME_HANDLER
from tests.components.k8s.node_bootstrap.node_harness import use_real_containerd
from tests.components.k8s.node_bootstrap.test_bootstrap_script_runs import make_node
from tests.real_parts import require_program

CRI = 'plugins."io.containerd.grpc.v1.cri"'


def _containerd() -> str:
    return require_program("containerd", "/usr/bin/containerd", "containerd")


def dump(containerd: str, config: Path) -> str:
    result = subprocess.run(
        [containerd, "--config", str(config), "config", "dump"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


TEMPLATE_PAUSE = "registry.example.com/mirror/pause:3.10"


def template_config(containerd: str) -> str:
    """A template's /etc/containerd/config.toml: the real default with `SystemdCgroup = true`
    (templates/README.md: the kubelet uses the systemd cgroup driver) and the site's pause image."""
    default = subprocess.run([containerd, "config", "default"], capture_output=True, text=True, check=True).stdout
    assert default.count("SystemdCgroup = false") == 1 and default.count('sandbox_image = "') == 1
    default = default.replace("SystemdCgroup = false", "SystemdCgroup = true")
    return re.sub(r'sandbox_image = "[^"]*"', f'sandbox_image = "{TEMPLATE_PAUSE}"', default)


def runtimes(dumped: str) -> dict[str, Any]:
    cri = tomllib.loads(dumped)["plugins"]["io.containerd.grpc.v1.cri"]
    found: dict[str, Any] = cri["containerd"]["runtimes"]
    return found


def test_the_real_default_config_is_version_2_without_the_nvidia_handler(tmp_path: Path) -> None:
    containerd = _containerd()
    default = subprocess.run([containerd, "config", "default"], capture_output=True, text=True, check=True).stdout
    config = tmp_path / "config.toml"
    config.write_text(default)
    dumped = dump(containerd, config)
    assert tomllib.loads(dumped)["version"] == 2
    assert NVIDIA_RUNTIME_HANDLER not in runtimes(dumped)
    # The script's own check (containerd_has_handler's pattern) finds no handler in the real dump.
    assert not re.search(rf"\.runtimes\.[\"']?{NVIDIA_RUNTIME_HANDLER}[\"']?\]", dumped)


def test_a_gpu_worker_adds_the_nvidia_handler_that_the_real_containerd_then_reports(tmp_path: Path) -> None:
    containerd = _containerd()
    node = make_node(tmp_path, "gpu-1", without=("containerd",))
    use_real_containerd(node, containerd)
    config = node.file("/etc/containerd/config.toml")
    config.write_text(template_config(containerd))

    run = node.boot()
    assert run.returncode == 0, run.output
    assert node.done
    assert node.calls_of("nvidia-ctk runtime configure")

    merged = runtimes(dump(containerd, config))
    nvidia = merged[NVIDIA_RUNTIME_HANDLER]  # the handler the `nvidia` RuntimeClass names
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert nvidia["options"]["SystemdCgroup"] is True
    # Not the default runtime: only pods of the RuntimeClass get it.
    cri = tomllib.loads(dump(containerd, config))["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["containerd"]["default_runtime_name"] == "runc"


def test_the_drop_in_keeps_the_runc_runtime_of_the_main_config(tmp_path: Path) -> None:
    containerd = _containerd()
    node = make_node(tmp_path, "gpu-1", without=("containerd",))
    use_real_containerd(node, containerd)
    config = node.file("/etc/containerd/config.toml")
    config.write_text(template_config(containerd))
    run = node.boot()
    assert run.returncode == 0, run.output
    # containerd 1.x replaces the whole CRI section with the drop-in's (services/server/config/
    # config.go mergeConfig); nvidia-ctk's `--config-source=command` drop-in carries all of it.
    assert "--config-source=command" in node.calls_of("nvidia-ctk runtime configure")[-1]
    merged = tomllib.loads(dump(containerd, config))["plugins"]["io.containerd.grpc.v1.cri"]
    assert {"runc", NVIDIA_RUNTIME_HANDLER} <= set(merged["containerd"]["runtimes"])
    assert merged["containerd"]["default_runtime_name"] == "runc"


def test_a_toolkit_whose_drop_in_drops_runc_stops_the_bootstrap_with_the_fix(tmp_path: Path) -> None:
    """A toolkit without `--config-source` writing a drop-in of the nvidia runtime alone: the real
    containerd then has no runc, so its CRI plugin would not load ("no corresponding runtime
    configured in containerd.runtimes for default_runtime_name", NVIDIA/k8s-device-plugin PR 1145)."""
    containerd = _containerd()
    node = make_node(tmp_path, "gpu-1", without=("containerd",))
    use_real_containerd(node, containerd)
    node.set("nvidia-ctk-without-config-source")
    config = node.file("/etc/containerd/config.toml")
    config.write_text(template_config(containerd))
    run = node.start()
    assert run.returncode != 0
    assert "containerd lost its default runtime after nvidia-ctk runtime configure" in run.output
    assert "runc" not in runtimes(dump(containerd, config))


def test_a_drop_in_built_from_defaults_that_resets_the_pause_image_and_cgroups_stops_the_bootstrap(
    tmp_path: Path,
) -> None:
    """The drop-in keeps a runc table, so the default-runtime check passes it; but the real
    containerd then runs pods with pause:3.6 from registry.k8s.io (not the template's mirror) and
    runc without SystemdCgroup, against the kubelet's systemd cgroup driver."""
    containerd = _containerd()
    node = make_node(tmp_path, "gpu-1", without=("containerd",))
    use_real_containerd(node, containerd)
    node.set("nvidia-ctk-from-defaults")
    config = node.file("/etc/containerd/config.toml")
    config.write_text(template_config(containerd))
    run = node.start()
    assert run.returncode != 0
    # The script's own sandbox image (kubeadm's pause), written before nvidia-ctk ran, is what it keeps.
    assert "containerd's sandbox image changed from registry.k8s.io/pause:3.10.1 to registry.k8s.io/pause:3.6" in run.output
    merged = tomllib.loads(dump(containerd, config))["plugins"]["io.containerd.grpc.v1.cri"]
    assert "runc" in merged["containerd"]["runtimes"]  # what the old check looked at: still there
    assert not node.calls_of("kubeadm")


def test_a_template_whose_runc_lacks_systemd_cgroup_stops_the_bootstrap(tmp_path: Path) -> None:
    containerd = _containerd()
    node = make_node(tmp_path, "gpu-1", without=("containerd",))
    use_real_containerd(node, containerd)
    config = node.file("/etc/containerd/config.toml")
    config.write_text(template_config(containerd).replace("SystemdCgroup = true", "SystemdCgroup = false"))
    run = node.start()
    assert run.returncode != 0
    assert "containerd's default runtime runs without SystemdCgroup = true" in run.output
    assert not node.calls_of("kubeadm")


def test_the_real_containerds_version_line_is_read_and_refused(tmp_path: Path) -> None:
    """The real `containerd --version` line (Debian 12: "containerd github.com/containerd/containerd
    1.6.20~ds1 ..."), read by the script's own pattern, is below 1.34's floors (1.6.39 on its line)."""
    containerd = _containerd()
    printed = subprocess.run([containerd, "--version"], capture_output=True, text=True, check=True).stdout
    version = re.match(r"containerd \S+ v?(\d+\.\d+\.\d+)", printed)
    assert version, printed
    node = make_node(tmp_path, "gpu-1", without=("containerd",))
    (Path(node.path) / "containerd").symlink_to(containerd)
    run = node.start()
    assert run.returncode == 1
    assert f"containerd {version.group(1)} is not one containerd recommends" in run.output
    assert not node.calls_of("kubeadm")
