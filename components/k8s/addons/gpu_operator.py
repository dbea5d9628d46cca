"""The NVIDIA GPU Operator for vGPU guests (Helm chart `gpu-operator` from NGC).

The operator builds nothing itself: the vGPU guest driver image comes from the user's private
registry (NVIDIA does not publish vGPU guest drivers publicly), and the driver is licensed through
the NVIDIA License System with a Secret holding `gridd.conf` and `client_configuration_token.tok`
(`driver.licensingConfig.secretName` with `nlsEnabled: true`; the older `configMapName` is
deprecated because it put the token in a ConfigMap).

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

from components.k8s.objects import (
    check_dns_label,
    gpu_toleration,
    namespace,
    register_objects,
)

CHART_REPOSITORY = "https://helm.ngc.nvidia.com/nvidia"
CHART_NAME = "gpu-operator"
CHART_VERSION = "v26.3.1"
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
    operator appends the node OS (`-rhel9.4`). The chart's `driver.version`."""
    licensing_token: pulumi.Input[str]
    """Contents of `client_configuration_token.tok` from the NVIDIA License System. Always stored
    as a secret, whether or not it arrives as one."""
    gridd_conf: str = DEFAULT_GRIDD_CONF
    """Contents of `gridd.conf`; default `FeatureType=1`."""
    driver_image_pull_secrets: Sequence[str] = ()
    """Names of existing image pull Secrets (in `namespace`) for the private registry; default
    none (the registry allows anonymous pulls from the nodes)."""
    namespace: str = "gpu-operator"
    """Namespace of the operator and its operands; created here."""
    chart_version: str = CHART_VERSION
    """Pinned chart version from https://helm.ngc.nvidia.com/nvidia (default v26.3.1)."""
    extra_values: Mapping[str, Any] = field(default_factory=dict)
    """Chart values merged (deeply) over the ones this component sets; default none."""

    def __post_init__(self) -> None:
        check_dns_label(self.namespace, "GPU Operator namespace")
        if not self.driver_repository or not self.driver_version:
            raise ValueError("GpuOperator: driver_repository and driver_version are required")
        if self.chart_version in ("", "latest"):
            raise ValueError("GpuOperator: pin chart_version (e.g. 'v26.3.1')")


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
        "devicePlugin": {"enabled": True},
        "daemonsets": {"tolerations": [gpu_toleration()]},
    }
    return deep_merge(values, args.extra_values)


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
        k8s.helm.v4.Chart(
            f"{name}-chart",
            chart=CHART_NAME,
            version=args.chart_version,
            namespace=args.namespace,
            repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=CHART_REPOSITORY),
            values=chart_values(args),
            # The chart's pods mount the licensing Secret and live in the namespace created above.
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[ns, licensing]),
        )
        self.namespace = args.namespace
        self.register_outputs({"namespace": self.namespace})
