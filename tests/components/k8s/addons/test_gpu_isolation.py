"""Issue 40 item 8: with the toolkit set to ignore NVIDIA_VISIBLE_DEVICES in unprivileged
containers, the stack's own GPU add-ons still see the GPUs and tenants see only what they asked for.

The toolkit's decision is the model in tests/components/k8s/nvidia_toolkit_double.py (a double,
docs/tests.md); the toolkit settings are those the bootstrap writes on GPU workers."""

from __future__ import annotations

from typing import Any

from components.k8s.addons.dcgm_exporter import DcgmExporterSettings, render_dcgm_exporter
from components.k8s.addons.device_plugin import DevicePluginSettings, render_device_plugin
from components.k8s.addons.gpu_operator import GpuOperatorArgs, chart_values
from tests.components.k8s.nvidia_toolkit_double import ToolkitConfig, container_from_pod, visible_devices

ISOLATED = ToolkitConfig(accept_envvar_unprivileged=False, accept_volume_mounts=True)
# Both images set it (k8s-device-plugin's Dockerfile and chart; dcgm-exporter's docker/Dockerfile).
IMAGE_ENV = {"NVIDIA_VISIBLE_DEVICES": "all"}


def daemonset_pod(objs: list[dict[str, Any]]) -> dict[str, Any]:
    (daemonset,) = [o for o in objs if o["kind"] == "DaemonSet"]
    pod: dict[str, Any] = daemonset["spec"]["template"]["spec"]
    return pod


def test_the_device_plugin_hands_out_gpus_as_volume_mounts() -> None:
    pod = daemonset_pod(render_device_plugin(DevicePluginSettings()))
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert env.get("DEVICE_LIST_STRATEGY") == "volume-mounts"


def test_the_device_plugin_still_sees_every_gpu_without_privilege() -> None:
    pod = daemonset_pod(render_device_plugin(DevicePluginSettings()))
    plugin = container_from_pod(pod, "nvidia-device-plugin-ctr", IMAGE_ENV)
    assert visible_devices(plugin, ISOLATED) == ["all"], "the device plugin would find no GPU and crash-loop"
    assert not plugin.sys_admin, "upstream's chart adds SYS_ADMIN here; a /dev/null device request needs none"
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_the_dcgm_exporter_still_sees_every_gpu_without_privilege() -> None:
    pod = daemonset_pod(render_dcgm_exporter(DcgmExporterSettings()))
    exporter = container_from_pod(pod, "exporter", IMAGE_ENV)
    assert visible_devices(exporter, ISOLATED) == ["all"], "the exporter would report no GPU"
    assert not exporter.sys_admin
    assert "nvidia.com/gpu" not in str(pod["containers"][0].get("resources", {})), "it must not take a GPU from jobs"


def test_gpu_operator_mode_sets_the_toolkit_and_the_device_plugin_strategy() -> None:
    values = chart_values(
        GpuOperatorArgs(
            provider=None,  # type: ignore[arg-type]  # chart_values never touches it
            driver_repository="r.example/nvidia",
            driver_version="550.127.05",
            licensing_token="t",
        )
    )
    toolkit_env = {e["name"]: e["value"] for e in values["toolkit"]["env"]}
    assert toolkit_env["ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED"] == "false"
    assert toolkit_env["ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS"] == "true"
    plugin_env = {e["name"]: e["value"] for e in values["devicePlugin"]["env"]}
    assert plugin_env["DEVICE_LIST_STRATEGY"] == "volume-mounts"
    assert values["devicePlugin"]["enabled"] is True
