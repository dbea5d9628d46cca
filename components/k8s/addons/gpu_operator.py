"""The NVIDIA GPU Operator for vGPU guests (Helm chart `gpu-operator` from NGC).

The operator builds nothing itself: the vGPU guest driver image comes from the user's private
registry (NVIDIA does not publish vGPU guest drivers publicly), and the driver is licensed through
the NVIDIA License System with a Secret holding `gridd.conf` and `client_configuration_token.tok`
(`driver.licensingConfig.secretName` with `nlsEnabled: true`; the older `configMapName` is
deprecated because it put the token in a ConfigMap).

The driver image the operator pulls is NOT `driver_repository/driver:driver_version`: the operator
appends the GPU nodes' OS to the tag (gpu-operator v26.7.0, `controllers/object_controls.go`
`resolveDriverTag` and `controllers/state_manager.go` `getGPUNodeOSInfo`): `<version>-<ID><VERSION_ID>`
from the nodes' NFD labels `feature.node.kubernetes.io/system-os_release.ID`/`.VERSION_ID`, with
the minor version dropped for `rocky`, `rhel` and `ol` only. So for driver 550.127.05 the registry
must hold `driver:550.127.05-rocky9` for Rocky 9 guests, `driver:550.127.05-rhel9` for RHEL 9,
but `driver:550.127.05-almalinux9.4` for Alma 9.4 (every minor release needs its own tag).
`driver_image_tag` computes it; a digest in `driver_version` skips the suffix.

Placement: the chart's operator Deployment and NFD master tolerate kubeadm's control-plane taint
and prefer the control plane; its operand DaemonSets tolerate `nvidia.com/gpu`. The NFD garbage
collector (an NFD subchart Deployment) tolerates nothing by default, which on a cluster where every
node is tainted leaves it Pending and the chart's await failing: we give it the control-plane
toleration. `visible_pod_templates` mirrors those placements so the plan's admission check can
judge them (the chart itself is rendered only at `pulumi up`).

Air-gapped sites (`image_registry`, `chart_files`): the chart's own documented settings move every
image it deploys, each component's `repository` (NVIDIA, "Install NVIDIA GPU Operator in Air-Gapped
Environments": "update values.yaml with your local registry", one `repository` per component) and
NFD's `node-feature-discovery.image.repository`; `chart_images` lists what runs, for
`stacks images`. The chart itself is then read from the mirror's file base as an archive URL
(pulumi_kubernetes helm/v4 Chart "Chart Resolution" 4: by absolute URL). The vGPU guest driver
image is the site's own already (`driver_repository`) and is left as it is.

The client configuration token stays a Pulumi secret end to end: it enters as a secret Output,
goes into the Secret's `stringData` as a secret, so the ConfigGroup input holding it is secret in
state and redacted in `plan`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.k8s.gpu_runtime import DEVICE_LIST_STRATEGY, NVIDIA_RUNTIME_CLASS
from components.k8s.mirror import mirrored_repository, mirrored_url
from components.k8s.objects import (
    CONTROL_PLANE_LABEL,
    GPU_NODE_LABEL,
    check_dns_label,
    control_plane_toleration,
    gpu_toleration,
    namespace,
    register_objects,
)

CHART_REPOSITORY = "https://helm.ngc.nvidia.com/nvidia"
CHART_NAME = "gpu-operator"
CHART_VERSION = "v26.7.0"

# The chart's image settings at v26.7.0 (deployments/gpu-operator/values.yaml and its NFD 0.19.0
# subchart): values path -> (default repository, image, tag). The operator and the validator take
# the chart's appVersion, which the published chart sets to its version.
CHART_IMAGE_SETTINGS: dict[tuple[str, ...], tuple[str, str, str]] = {
    ("operator",): ("nvcr.io/nvidia", "gpu-operator", CHART_VERSION),
    ("validator",): ("nvcr.io/nvidia", "gpu-operator", CHART_VERSION),
    ("driver", "manager"): ("nvcr.io/nvidia/cloud-native", "k8s-driver-manager", "v0.12.0"),
    ("toolkit",): ("nvcr.io/nvidia/k8s", "container-toolkit", "v1.20.0"),
    ("devicePlugin",): ("nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0"),
    ("gfd",): ("nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0"),
    ("dcgmExporter",): ("nvcr.io/nvidia/k8s", "dcgm-exporter", "4.6.0-4.8.3-distroless"),
    ("migManager",): ("nvcr.io/nvidia/cloud-native", "k8s-mig-manager", "v0.15.0"),
    ("dcgm",): ("nvcr.io/nvidia/cloud-native", "dcgm", "4.6.0-1-ubuntu24.04"),
    ("nodeStatusExporter",): ("nvcr.io/nvidia", "gpu-operator", CHART_VERSION),
    ("gds",): ("nvcr.io/nvidia/cloud-native", "nvidia-fs", "2.29.4"),
    ("gdrcopy",): ("nvcr.io/nvidia/cloud-native", "gdrdrv", "v2.6"),
    ("vgpuManager", "driverManager"): ("nvcr.io/nvidia/cloud-native", "k8s-driver-manager", "v0.12.0"),
    ("vgpuDeviceManager",): ("nvcr.io/nvidia/cloud-native", "vgpu-device-manager", "v0.5.0"),
    ("vfioManager",): ("nvcr.io/nvidia/cloud-native", "k8s-driver-manager", "v0.12.0"),
    ("vfioManager", "driverManager"): ("nvcr.io/nvidia/cloud-native", "k8s-driver-manager", "v0.12.0"),
    ("sandboxDevicePlugin",): ("nvcr.io/nvidia", "kubevirt-gpu-device-plugin", "v1.6.0"),
    ("kataSandboxDevicePlugin",): ("nvcr.io/nvidia/cloud-native", "nvidia-sandbox-device-plugin", "v0.0.5"),
    ("ccManager",): ("nvcr.io/nvidia/cloud-native", "k8s-cc-manager", "v0.4.3"),
    ("draDriver",): ("nvcr.io/nvidia", "dra-driver-nvidia-gpu", "v0.5.0"),
}
NFD_IMAGE = "registry.k8s.io/nfd/node-feature-discovery:v0.19.0"
"""NFD subchart 0.19.0 `image.repository`, tag its appVersion."""
RUNNING_COMPONENTS: tuple[tuple[str, ...], ...] = (
    ("operator",),
    ("validator",),
    ("driver", "manager"),
    ("toolkit",),
    ("devicePlugin",),
    ("gfd",),
    ("dcgmExporter",),
    ("migManager",),
)
"""What the chart runs for vGPU guests with this component's values: the components enabled by
default outside sandbox (VM passthrough) workloads; dcgm-exporter unless monitoring turns it off.
The driver image itself is the site's (`driver_repository`)."""
LICENSING_SECRET = "licensing-config"
DEFAULT_GRIDD_CONF = "# NVIDIA License System client (vGPU guest)\nFeatureType=1\n"
"""FeatureType=1 (NVIDIA vGPU): with NLS the licensed product follows the VM's vGPU profile."""


@dataclass(frozen=True, kw_only=True)
class GpuOperatorArgs:
    provider: k8s.Provider
    """The cluster's explicit Kubernetes provider."""
    driver_repository: str
    """Private registry path holding the vGPU guest driver image (e.g. `registry.example/nvidia`);
    the chart's `driver.repository`. No default: NVIDIA does not publish this image."""
    driver_version: str
    """Tag prefix of the driver image (the vGPU guest driver version, e.g. `550.127.05`); the
    operator appends the node OS (`-rocky9`, `-rhel9`, `-almalinux9.4`: see `driver_image_tag`).
    The chart's `driver.version`."""
    licensing_token: pulumi.Input[str]
    """Contents of `client_configuration_token.tok` from the NVIDIA License System. Always stored
    as a secret, whether or not it arrives as one."""
    gridd_conf: str = DEFAULT_GRIDD_CONF
    """Contents of `gridd.conf`; default `FeatureType=1`."""
    driver_image_pull_secrets: Sequence[str] = ()
    """Names of existing image pull Secrets (in `namespace`) for the private registry; default
    none (the registry allows anonymous pulls from the nodes)."""
    namespace: str = "gpu-operator"
    """Namespace of the operator and its operands, created here enforcing Pod Security
    `privileged` (its driver and toolkit pods must be); default `gpu-operator`."""
    chart_version: str = CHART_VERSION
    """Pinned chart version from https://helm.ngc.nvidia.com/nvidia (default v26.7.0, August 2026).
    Newer charts move the default driver branch and operand images; re-check the driver tag rule
    (`driver_image_tag`) when moving it."""
    extra_values: Mapping[str, Any] = field(default_factory=dict)
    """Chart values merged (deeply) over the ones this component sets; default none."""
    image_registry: str | None = None
    """Mirror registry prefix every chart image is pulled from (each component's `repository`);
    default none: nvcr.io and registry.k8s.io."""
    chart_files: str | None = None
    """Mirror file base the chart archive is read from (`<files>/helm.ngc.nvidia.com/nvidia/charts/
    gpu-operator-<version>.tgz`); default none: NGC's Helm repository."""

    def __post_init__(self) -> None:
        check_dns_label(self.namespace, "GPU Operator namespace")
        if not self.driver_repository or not self.driver_version:
            raise ValueError("GpuOperator: driver_repository and driver_version are required")
        if self.chart_version in ("", "latest"):
            raise ValueError("GpuOperator: pin chart_version (e.g. 'v26.7.0')")


VALIDATOR_IMAGE = "nvcr.io/nvidia/cloud-native/gpu-operator-validator"
"""The operator's validator image (chart values `validator.repository`/`validator.image`; its
`version` defaults to the chart's appVersion, which equals the chart version)."""


def validator_image(chart_version: str) -> str:
    """The validator image a chart version runs on every GPU node. Its DaemonSet
    `nvidia-operator-validator` keeps it running as `sh -c "echo all validations are successful;
    sleep infinity"` (gpu-operator `assets/state-operator-validation/0500_daemonset.yaml`), so the
    image has a shell and `sleep`, unlike the operator's distroless dcgm-exporter."""
    return f"{VALIDATOR_IMAGE}:{chart_version}"


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` merged into `base`: nested mappings merge, everything else replaces."""
    merged: dict[str, Any] = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def chart_values(args: GpuOperatorArgs) -> dict[str, Any]:
    """Helm values for the vGPU guest setup."""
    values: dict[str, Any] = {
        "driver": {
            "enabled": True,
            "repository": args.driver_repository,
            "version": args.driver_version,
            "imagePullSecrets": list(args.driver_image_pull_secrets),
            "licensingConfig": {"secretName": LICENSING_SECRET, "nlsEnabled": True},
        },
        # A pod gets the GPUs of its `nvidia.com/gpu` limit and no more: the operator's toolkit
        # ignores NVIDIA_VISIBLE_DEVICES in unprivileged containers and takes the device plugin's
        # volume mounts (NVIDIA GPU Operator docs, "Security Considerations: Preventing
        # Unprivileged Access to GPUs"; the toolkit container reads these variables,
        # nvidia-ctk-installer's toolkit flags). The operator's own operands that watch every GPU
        # (dcgm-exporter, validator) run privileged, which the toolkit serves regardless.
        "toolkit": {
            "env": [
                {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
                {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"},
            ]
        },
        "devicePlugin": {
            "enabled": True,
            "env": [{"name": "DEVICE_LIST_STRATEGY", "value": DEVICE_LIST_STRATEGY}],
        },
        "daemonsets": {"tolerations": [gpu_toleration()]},
        # The chart's default, written out: GPU pods of this project name the same RuntimeClass in
        # both GPU modes (components/k8s/gpu_runtime.py), and the operator creates it (it would
        # also take over and rewrite one of that name created by anyone else).
        "operator": {"runtimeClass": NVIDIA_RUNTIME_CLASS},
        # Not the chart's default: NFD's garbage collector tolerates nothing and would stay Pending
        # on a cluster whose every node is tainted.
        "node-feature-discovery": {"gc": {"tolerations": [control_plane_toleration()]}},
    }
    values = deep_merge(values, mirror_values(args.image_registry))
    return deep_merge(values, args.extra_values)


def mirror_values(registry: str | None) -> dict[str, Any]:
    """Every chart image's `repository` in the mirror; {} without one."""
    if not registry:
        return {}
    values: dict[str, Any] = {}
    for path, (repository, _, _) in CHART_IMAGE_SETTINGS.items():
        values = deep_merge(values, _nested(path, {"repository": mirrored_repository(repository, registry)}))
    nfd_repository = NFD_IMAGE.rsplit(":", 1)[0]
    values["node-feature-discovery"] = {"image": {"repository": mirrored_repository(nfd_repository, registry)}}
    return values


def _nested(path: Sequence[str], leaf: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = leaf
    for key in reversed(path):
        value = {key: value}
    return value


def chart_images(*, exporter: bool) -> list[str]:
    """The public images the chart runs for vGPU guests (`RUNNING_COMPONENTS`, the exporter only
    when `exporter`), deduplicated, plus NFD's."""
    images: list[str] = []
    for path in RUNNING_COMPONENTS:
        if path == ("dcgmExporter",) and not exporter:
            continue
        repository, image, tag = CHART_IMAGE_SETTINGS[path]
        images.append(f"{repository}/{image}:{tag}")
    images.append(NFD_IMAGE)
    return list(dict.fromkeys(images))


def chart_archive_url(version: str = CHART_VERSION) -> str:
    """The chart archive in NGC's Helm repository (its index's `urls` entry for the release)."""
    return f"{CHART_REPOSITORY}/charts/{CHART_NAME}-{version}.tgz"


# The chart's defaults (gpu-operator v26.7.0 `deployments/gpu-operator/values.yaml` and its NFD 0.19
# subchart) for the pods whose placement the values decide.
_CHART_DEFAULT_PLACEMENT: dict[str, dict[str, Any]] = {
    "operator": {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [control_plane_toleration()],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {
                            "matchExpressions": [{"key": CONTROL_PLANE_LABEL, "operator": "In", "values": [""]}]
                        },
                    }
                ]
            }
        },
    },
    "nfd-master": {"tolerations": [control_plane_toleration()]},
    "nfd-gc": {"tolerations": []},
    "nfd-worker": {"tolerations": [control_plane_toleration(), gpu_toleration()]},
    "operands": {"tolerations": [gpu_toleration()]},
}


def _placed(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    spec = {key: values.get(key, default) for key, default in defaults.items()}
    return {key: value for key, value in spec.items() if value}


def visible_pod_templates(values: Mapping[str, Any], namespace_: str) -> list[dict[str, Any]]:
    """The chart's workloads as far as `values` decide where they run, as minimal objects.

    Only placement (nodeSelector, tolerations, affinity) is modelled: images and resources come
    from the chart at `pulumi up`. The operands (driver, toolkit, device plugin, validator, ...) are
    DaemonSets the operator creates on nodes it labels `nvidia.com/gpu.deploy.*`, i.e. GPU nodes:
    one stand-in DaemonSet selecting the GPU label represents them.
    """
    nfd = values.get("node-feature-discovery", {})

    def workload(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"template": {"spec": {**spec, "containers": [{"name": name, "image": "chart"}]}}}
        if kind == "Deployment":
            body["replicas"] = 1
        return {"kind": kind, "metadata": {"name": name, "namespace": namespace_}, "spec": body}

    operands = _placed(values.get("daemonsets", {}), _CHART_DEFAULT_PLACEMENT["operands"])
    workloads = [
        workload(
            "Deployment", "gpu-operator", _placed(values.get("operator", {}), _CHART_DEFAULT_PLACEMENT["operator"])
        ),
        workload("DaemonSet", "gpu-operator-operands", {**operands, "nodeSelector": dict(GPU_NODE_LABEL)}),
    ]
    if values.get("nfd", {}).get("enabled", True):
        workloads += [
            workload(
                "Deployment", "nfd-master", _placed(nfd.get("master", {}), _CHART_DEFAULT_PLACEMENT["nfd-master"])
            ),
            workload("Deployment", "nfd-gc", _placed(nfd.get("gc", {}), _CHART_DEFAULT_PLACEMENT["nfd-gc"])),
            workload("DaemonSet", "nfd-worker", _placed(nfd.get("worker", {}), _CHART_DEFAULT_PLACEMENT["nfd-worker"])),
        ]
    return workloads


def driver_image_tag(driver_version: str, os_id: str, os_version_id: str) -> str:
    """The tag the GPU Operator pulls for `driver_version` on nodes with that os-release ID and
    VERSION_ID (gpu-operator v26.7.0 `getGPUNodeOSInfo` + `resolveDriverTag`)."""
    if "sha256:" in driver_version:
        return driver_version
    version = os_version_id.split(".")[0] if os_id in ("ol", "rocky", "rhel") else os_version_id
    return f"{driver_version}-{os_id}{version}"


def render_namespace(args: GpuOperatorArgs) -> dict[str, Any]:
    """The operator's namespace (its operands are privileged by nature)."""
    return namespace(
        args.namespace,
        enforce="privileged",
        exception_reason=(
            "the GPU Operator's driver and toolkit DaemonSets load kernel modules and configure "
            "the container runtime on the node; they must run privileged"
        ),
    )


def render_licensing_secret(args: GpuOperatorArgs) -> dict[str, Any]:
    """The NLS licensing Secret; the token goes in as a secret Output, so the whole object (and
    the ConfigGroup input holding it) is secret. Kept alone in its group so that `plan` still
    shows the other objects."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": LICENSING_SECRET, "namespace": args.namespace},
        "type": "Opaque",
        "stringData": {
            "gridd.conf": args.gridd_conf,
            "client_configuration_token.tok": pulumi.Output.secret(args.licensing_token),
        },
    }


class GpuOperator(pulumi.ComponentResource):
    """NVIDIA GPU Operator with the vGPU guest driver from a private registry, NLS-licensed."""

    namespace: str
    """Namespace of the operator."""

    def __init__(self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:GpuOperator", name, None, opts)
        ns = register_objects(f"{name}-namespace", [render_namespace(args)], parent=self, provider=args.provider)
        licensing = register_objects(
            f"{name}-licensing",
            [render_licensing_secret(args)],
            parent=self,
            provider=args.provider,
            depends_on=[ns],
        )
        if args.chart_files:
            # The archive from the mirror by absolute URL: no repository index to serve.
            source: dict[str, Any] = {"chart": mirrored_url(chart_archive_url(args.chart_version), args.chart_files)}
        else:
            source = {
                "chart": CHART_NAME,
                "version": args.chart_version,
                "repository_opts": k8s.helm.v4.RepositoryOptsArgs(repo=CHART_REPOSITORY),
            }
        k8s.helm.v4.Chart(
            f"{name}-chart",
            **source,
            namespace=args.namespace,
            values=chart_values(args),
            # The chart's pods mount the licensing Secret and live in the namespace created above.
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[ns, licensing]),
        )
        self.namespace = args.namespace
        self.register_outputs({"namespace": self.namespace})
