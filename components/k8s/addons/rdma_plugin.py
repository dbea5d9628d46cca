"""RDMA for pods: the Mellanox/NVIDIA k8s-rdma-shared-dev-plugin on GPU workers.

The plugin finds PCI network functions matching a selector (by default VMware's PVRDMA function:
vendor 15ad, device 0820, driver vmw_pvrdma), and advertises `<prefix>/<resourceName>` (default
`rdma/pvrdma`), shared by up to `rdmaHcaMax` pods per node. A pod requesting it gets the RDMA
character devices (`/dev/infiniband/uverbs*`, `rdma_cm`, `umad*`) through the device plugin API,
so job pods need neither privilege nor a hostPath of `/dev/infiniband`; they add `IPC_LOCK` to pin
memory for RDMA.

Least privilege, compared with upstream's `deployment/k8s/base/daemonset.yaml` (which runs the
container `privileged: true` and mounts all of the host's `/dev`):

- the plugin only *reads* the host: PCI devices and their drivers under `/sys` (the container
  runtime's read-only sysfs shows them), the RDMA devices' char files (we mount the host's
  `/dev/infiniband` read-only instead of all of `/dev`), and netlink link/RDMA queries, which need
  no capability;
- it *writes* only its gRPC sockets into the kubelet's `device-plugins` and `plugins_registry`
  directories (hostPath); as uid 0 owning those root-owned directories it needs no
  `CAP_DAC_OVERRIDE`;
- `hostNetwork: true` stays, as upstream: interface names and link types are looked up in the
  host's network namespace.

So the container is not privileged, drops all capabilities and cannot escalate. The namespace still
enforces Pod Security `privileged`, because hostPath and hostNetwork are outside `baseline`; the
namespace's exception annotation records that.

On SELinux-enforcing nodes the socket write into the kubelet directories may be denied to
`container_t`; see docs/training-jobs.md (troubleshooting) before reaching for `privileged`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.k8s.objects import (
    GPU_NODE_LABEL,
    app_labels,
    check_dns_label,
    check_dns_subdomain,
    check_image,
    gpu_toleration,
    namespace,
    register_objects,
)

RDMA_PLUGIN_IMAGE = "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3"
CONFIG_MAP = "rdma-devices"
CONFIG_DIR = "/k8s-rdma-shared-dev-plugin"
"""Where the plugin reads `config.json` (its compiled-in default path)."""
KUBELET_DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"
KUBELET_PLUGINS_REGISTRY = "/var/lib/kubelet/plugins_registry"
_RESOURCE_NAME = re.compile(r"^[a-zA-Z0-9_]+$")
_HEX_ID = re.compile(r"^[0-9a-f]{4}$")


@dataclass(frozen=True, kw_only=True)
class RdmaResource:
    """One entry of the plugin's `configList`: a resource and the devices backing it."""

    resource_name: str = "pvrdma"
    """Resource name; pods request `<resource_prefix>/<resource_name>`. Default `pvrdma`."""
    resource_prefix: str = "rdma"
    """Resource prefix (the plugin's own default). Default `rdma`."""
    rdma_hca_max: int = 64
    """How many pods on one node may share the device. Default 64."""
    vendors: Sequence[str] = ("15ad",)
    """PCI vendor ids (hex, no 0x). Default VMware `15ad`."""
    device_ids: Sequence[str] = ("0820",)
    """PCI device ids. Default `0820`, the PVRDMA function (Linux `PCI_DEVICE_ID_VMWARE_PVRDMA`)."""
    drivers: Sequence[str] = ("vmw_pvrdma",)
    """Kernel drivers bound to the function. Default `vmw_pvrdma`."""
    if_names: Sequence[str] = ()
    """Network interface names; default none. The PVRDMA function has no netdev of its own (its
    paired vmxnet3 function has), so selecting on names would select nothing by default."""
    link_types: Sequence[str] = ()
    """Link types (`ether`, `infiniband`); default none, for the same reason."""

    @property
    def extended_resource(self) -> str:
        """What pods put in `resources.limits`, e.g. `rdma/pvrdma`."""
        return f"{self.resource_prefix}/{self.resource_name}"

    def __post_init__(self) -> None:
        if not _RESOURCE_NAME.match(self.resource_name):
            raise ValueError(
                f"RDMA resource_name {self.resource_name!r}: letters, digits and '_' only "
                "(the plugin rejects anything else)"
            )
        check_dns_subdomain(self.resource_prefix, "RDMA resource_prefix")
        if self.rdma_hca_max < 1:
            raise ValueError("RDMA rdma_hca_max must be at least 1")
        for what, ids in (("vendors", self.vendors), ("device_ids", self.device_ids)):
            for value in ids:
                if not _HEX_ID.match(value):
                    raise ValueError(f"RDMA {what}: {value!r} is not a 4-digit lower-case hex id")
        if not any((self.vendors, self.device_ids, self.drivers, self.if_names, self.link_types)):
            raise ValueError("RDMA resource needs at least one selector (the plugin requires one)")


def plugin_config(resources: Sequence[RdmaResource], periodic_update_interval: int) -> dict[str, Any]:
    """The plugin's `config.json` as a dict."""
    config_list = []
    for resource in resources:
        selectors: dict[str, list[str]] = {}
        for key, values in (
            ("vendors", resource.vendors),
            ("deviceIDs", resource.device_ids),
            ("drivers", resource.drivers),
            ("ifNames", resource.if_names),
            ("linkTypes", resource.link_types),
        ):
            if values:
                selectors[key] = list(values)
        config_list.append(
            {
                "resourceName": resource.resource_name,
                "resourcePrefix": resource.resource_prefix,
                "rdmaHcaMax": resource.rdma_hca_max,
                "selectors": selectors,
            }
        )
    return {"periodicUpdateInterval": periodic_update_interval, "configList": config_list}


@dataclass(frozen=True, kw_only=True)
class RdmaPluginSettings:
    """Everything the plugin's objects are rendered from (plain values only)."""

    namespace: str = "rdma-device-plugin"
    """Namespace of the plugin, created here enforcing Pod Security `privileged` (hostNetwork and
    hostPath); default `rdma-device-plugin`, its own so that exception covers nothing else."""
    image: str = RDMA_PLUGIN_IMAGE
    """Plugin image, pinned (default `ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3`)."""
    resources: Sequence[RdmaResource] = (RdmaResource(),)
    """Resources to advertise; default one: `rdma/pvrdma` on VMware PVRDMA functions."""
    periodic_update_interval: int = 300
    """Seconds between device rescans (0 disables); default 300."""
    node_selector: Mapping[str, str] = field(default_factory=lambda: dict(GPU_NODE_LABEL))
    """Nodes the plugin runs on; default GPU workers (`nvidia.com/gpu.present=true`)."""

    def __post_init__(self) -> None:
        check_dns_label(self.namespace, "RDMA plugin namespace")
        check_image(self.image, "RDMA plugin image")
        if not self.resources:
            raise ValueError("RDMA plugin needs at least one resource")
        names = [r.extended_resource for r in self.resources]
        if len(set(names)) != len(names):
            raise ValueError(f"RDMA plugin resources must be unique, got {names}")
        if self.periodic_update_interval < 0:
            raise ValueError("RDMA plugin periodic_update_interval must be >= 0")


def render_rdma_plugin(settings: RdmaPluginSettings) -> list[dict[str, Any]]:
    """Namespace, `rdma-devices` ConfigMap and the DaemonSet."""
    labels = app_labels("rdma-shared-dev-plugin", "rdma-device-plugin")
    config = plugin_config(settings.resources, settings.periodic_update_interval)
    host_paths = [
        ("device-plugin", KUBELET_DEVICE_PLUGINS, KUBELET_DEVICE_PLUGINS, False, "Directory"),
        ("plugins-registry", KUBELET_PLUGINS_REGISTRY, KUBELET_PLUGINS_REGISTRY, False, "Directory"),
        # Read-only: the plugin checks the RDMA char devices exist; it never opens them.
        ("infiniband", "/dev/infiniband", "/dev/infiniband", True, "Directory"),
    ]
    return [
        namespace(
            settings.namespace,
            enforce="privileged",
            exception_reason=(
                "RDMA device plugin uses hostNetwork and hostPath mounts of the kubelet plugin "
                "directories and /dev/infiniband (read-only); the container is not privileged "
                "and drops all capabilities"
            ),
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "namespace": settings.namespace, "labels": labels},
            "data": {"config.json": json.dumps(config, indent=2, sort_keys=True) + "\n"},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": "rdma-shared-dp-ds",
                "namespace": settings.namespace,
                "labels": labels,
            },
            "spec": {
                "selector": {"matchLabels": labels},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        # Interface names and link types are looked up in the host's netns.
                        "hostNetwork": True,
                        "dnsPolicy": "ClusterFirstWithHostNet",
                        "priorityClassName": "system-node-critical",
                        "nodeSelector": dict(settings.node_selector),
                        "tolerations": [gpu_toleration()],
                        "automountServiceAccountToken": False,
                        "containers": [
                            {
                                "name": "k8s-rdma-shared-dp-ds",
                                "image": settings.image,
                                "imagePullPolicy": "IfNotPresent",
                                "securityContext": {
                                    "privileged": False,
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {"name": n, "mountPath": mount, "readOnly": ro} for n, _, mount, ro, _ in host_paths
                                ]
                                + [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}],
                            }
                        ],
                        "volumes": [
                            {"name": n, "hostPath": {"path": path, "type": kind}} for n, path, _, _, kind in host_paths
                        ]
                        + [
                            {
                                "name": "config",
                                "configMap": {
                                    "name": CONFIG_MAP,
                                    "items": [{"key": "config.json", "path": "config.json"}],
                                },
                            }
                        ],
                    },
                },
            },
        },
    ]


@dataclass(frozen=True, kw_only=True)
class RdmaDevicePluginArgs:
    provider: k8s.Provider
    """The cluster's explicit Kubernetes provider; the only thing this component depends on."""
    settings: RdmaPluginSettings = field(default_factory=RdmaPluginSettings)
    """What to deploy; defaults as documented on `RdmaPluginSettings` (PVRDMA → `rdma/pvrdma`)."""


class RdmaDevicePlugin(pulumi.ComponentResource):
    """Advertises the PVRDMA device to pods as an extended resource."""

    resource_names: list[str]
    """Extended resources pods can request, e.g. `["rdma/pvrdma"]`."""
    namespace: str

    def __init__(self, name: str, args: RdmaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:RdmaDevicePlugin", name, None, opts)
        register_objects(
            f"{name}-objects",
            render_rdma_plugin(args.settings),
            parent=self,
            provider=args.provider,
        )
        self.resource_names = [r.extended_resource for r in args.settings.resources]
        self.namespace = args.settings.namespace
        self.register_outputs({"resource_names": self.resource_names, "namespace": self.namespace})
