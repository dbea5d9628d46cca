"""Test double: which GPUs the NVIDIA Container Toolkit gives a container (listed in docs/tests.md).

No GPU, driver or toolkit can be installed here (the toolkit ships from NVIDIA's own package
repository, and it acts only on a node with the driver), so the toolkit's decision is modelled as
its source makes it, NVIDIA/nvidia-container-toolkit `internal/config/image/cuda_image.go`,
`CUDA.VisibleDevices` (the runtime hook's legacy path decides the same way):

1. CDI annotations first (not used by this project: none of our objects sets them);
2. with `accept-nvidia-visible-devices-as-volume-mounts = true`: the container's mounts whose
   host source is `/dev/null` and whose destination lies under `/var/run/nvidia-container-devices`
   name the devices (the last path part: `all`, an index or a UUID); any found are the answer;
3. otherwise `NVIDIA_VISIBLE_DEVICES` (unset, empty or `void`: no devices; `none`: none), used
   only when the container is privileged or `accept-nvidia-visible-devices-envvar-when-unprivileged`
   is true. "Privileged" is `CAP_SYS_ADMIN` in the bounding set (`image/privileged.go`), which
   `privileged: true` or `capabilities.add: [SYS_ADMIN]` gives and containerd's default set lacks.

The defaults are the toolkit's own (`internal/config/config.go`, GetDefault): envvar accepted from
unprivileged containers (true), volume mounts not read (false). Never kinder than the toolkit: an
unknown key or a config that is not TOML fails the test, and the image's own environment counts
(the device plugin's and dcgm-exporter's images set `NVIDIA_VISIBLE_DEVICES=all`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ENVVAR_WHEN_UNPRIVILEGED = "accept-nvidia-visible-devices-envvar-when-unprivileged"
AS_VOLUME_MOUNTS = "accept-nvidia-visible-devices-as-volume-mounts"
DEVICE_LIST_ROOT = "/var/run/nvidia-container-devices"


@dataclass(frozen=True)
class ToolkitConfig:
    accept_envvar_unprivileged: bool = True
    accept_volume_mounts: bool = False

    @classmethod
    def from_toml(cls, text: str) -> ToolkitConfig:
        data = tomllib.loads(text)
        return cls(
            accept_envvar_unprivileged=bool(data.get(ENVVAR_WHEN_UNPRIVILEGED, True)),
            accept_volume_mounts=bool(data.get(AS_VOLUME_MOUNTS, False)),
        )


@dataclass(frozen=True)
class Container:
    """What the runtime sees of a container: its environment (image's, then the pod's), its bind
    mounts as (host source, container destination), and whether CAP_SYS_ADMIN is in its bounding set."""

    env: Mapping[str, str] = field(default_factory=dict)
    mounts: Sequence[tuple[str, str]] = ()
    sys_admin: bool = False


def visible_devices(container: Container, config: ToolkitConfig) -> list[str]:
    """The devices the toolkit injects: [] for none, ["all"] for every GPU of the node."""
    if config.accept_volume_mounts:
        from_mounts = [
            destination.removeprefix(DEVICE_LIST_ROOT).strip("/")
            for source, destination in container.mounts
            if source.rstrip("/") == "/dev/null" and destination.startswith(DEVICE_LIST_ROOT + "/")
        ]
        if any(from_mounts):
            return [device for device in from_mounts if device]
    value = container.env.get("NVIDIA_VISIBLE_DEVICES", "")
    if value in ("", "void", "none"):
        return []
    if container.sys_admin or config.accept_envvar_unprivileged:
        return value.split(",")
    return []


def container_from_pod(pod_spec: Mapping[str, Any], name: str, image_env: Mapping[str, str]) -> Container:
    """The runtime's view of container `name` of a rendered pod spec: hostPath volumes become bind
    mounts from their path (the kubelet mounts the host path itself), env values are the literal
    ones (a valueFrom is not a device request)."""
    (spec,) = [c for c in pod_spec["containers"] if c["name"] == name]
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod_spec.get("volumes", []) if "hostPath" in v}
    mounts = [(host_paths[m["name"]], m["mountPath"]) for m in spec.get("volumeMounts", []) if m["name"] in host_paths]
    env = dict(image_env)
    env.update({e["name"]: e["value"] for e in spec.get("env", []) if "value" in e})
    security = spec.get("securityContext", {})
    added = security.get("capabilities", {}).get("add", [])
    sys_admin = bool(security.get("privileged")) or any(c in ("SYS_ADMIN", "CAP_SYS_ADMIN") for c in added)
    return Container(env=env, mounts=mounts, sys_admin=sys_admin)
