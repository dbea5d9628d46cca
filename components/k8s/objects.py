"""Small shared pieces of the Kubernetes layer: plain-dict object builders and one registration
helper.

Every Kubernetes object this project creates is rendered as a plain dict by a pure function (so it
can be validated and shown by `plan` without a cluster) and registered through
`pulumi_kubernetes.yaml.v2.ConfigGroup` on the explicit provider passed in by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pulumi
import pulumi_kubernetes as k8s

# The class itself, not `k8s.yaml.v2.ConfigGroup` looked up at call time: pulumi_kubernetes loads
# its submodules lazily, and what this module needs should load when it does (and fail there).
from pulumi_kubernetes.yaml.v2 import ConfigGroup

from components.k8s.gpu_runtime import NVIDIA_RUNTIME_CLASS

PodSecurityLevel = Literal["privileged", "baseline", "restricted"]

GPU_NODE_LABEL: Mapping[str, str] = {"nvidia.com/gpu.present": "true"}
"""The label GPU workers carry (set by the node bootstrap; the GPU Operator's feature discovery
sets the same one). Add-ons and jobs that need a GPU node select on it."""

GPU_TAINT_KEY = "nvidia.com/gpu"
"""GPU workers are tainted `nvidia.com/gpu:NoSchedule` so that only pods that mean to be there
land on them."""

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
"""kubeadm labels (value "") and taints (`NoSchedule`, no value) every control-plane node with this
key (kubeadm `constants.LabelNodeRoleControlPlane`, phase `mark-control-plane`)."""

SECURITY_EXCEPTION_ANNOTATION = "gpucluster.io/pod-security-exception"
"""Every namespace enforcing the `privileged` Pod Security level says why in this annotation, so a
policy (or a reviewer reading `plan`) can tell a documented exception from an accident."""

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")


def gpu_toleration() -> dict[str, Any]:
    """Tolerate the GPU workers' taint (any value)."""
    return {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}


def control_plane_toleration() -> dict[str, Any]:
    """Tolerate kubeadm's control-plane taint, exactly as kubeadm sets it (`Equal ""`, as the GPU
    Operator and NFD charts write it): a pod meant for the control plane says so, and tolerates
    nothing else there."""
    return {"key": CONTROL_PLANE_LABEL, "operator": "Equal", "value": "", "effect": "NoSchedule"}


def control_plane_selector() -> dict[str, str]:
    """Select kubeadm's control-plane nodes (label value "")."""
    return {CONTROL_PLANE_LABEL: ""}


def gpu_runtime_fields() -> dict[str, str]:
    """What every pod that asks for `nvidia.com/gpu` adds to its pod spec: the NVIDIA RuntimeClass.

    The NVIDIA runtime is not containerd's default on our GPU workers (the bootstrap registers it as
    the extra handler `nvidia`), so a GPU pod without it starts under runc and sees no GPU even
    though the scheduler gave it one. Merge it into the pod spec: `{**spec, **gpu_runtime_fields()}`.
    """
    return {"runtimeClassName": NVIDIA_RUNTIME_CLASS}


def app_labels(name: str, component: str) -> dict[str, str]:
    """The recommended `app.kubernetes.io/*` labels, also used as selectors."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "gpucluster",
    }


def check_dns_label(value: str, what: str) -> None:
    """Reject a name Kubernetes would refuse, before anything is registered."""
    if len(value) > 63 or not _DNS1123_LABEL.match(value):
        raise ValueError(
            f"{what} {value!r} is not a valid Kubernetes name: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )


def check_dns_subdomain(value: str, what: str) -> None:
    """Reject a DNS subdomain (e.g. an extended resource's prefix) Kubernetes would refuse."""
    if len(value) > 253 or not _DNS1123_SUBDOMAIN.match(value):
        raise ValueError(f"{what} {value!r} is not a valid DNS subdomain: dot-separated lower-case labels")


def image_is_pinned(image: str) -> bool:
    """True when `image` names an explicit tag other than `latest`, or a digest."""
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return False
    tag = last.rsplit(":", 1)[1]
    return tag != "latest" and bool(_TAG.match(tag))


def check_image(image: str, what: str) -> None:
    """Reject unpinned images: a `latest` or missing tag makes a rollout unrepeatable."""
    if not image_is_pinned(image):
        raise ValueError(f"{what} {image!r} is not pinned: give an explicit tag (not 'latest') or a digest")


def namespace(
    name: str,
    *,
    enforce: PodSecurityLevel,
    exception_reason: str | None = None,
    warn: PodSecurityLevel | None = None,
    audit: PodSecurityLevel | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Namespace carrying Pod Security Admission labels.

    `warn` and `audit` default to the enforced level. Enforcing `privileged` is an exception and
    needs `exception_reason`, which lands in an annotation for policies and reviewers.
    """
    check_dns_label(name, "namespace")
    if enforce == "privileged" and not exception_reason:
        raise ValueError(
            f"namespace {name!r} enforces Pod Security level 'privileged': say why in "
            "exception_reason (it is recorded on the namespace)"
        )
    if enforce != "privileged" and exception_reason:
        raise ValueError(f"namespace {name!r}: exception_reason is only for namespaces that enforce 'privileged'")
    pod_security = {
        "pod-security.kubernetes.io/enforce": enforce,
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": warn or enforce,
        "pod-security.kubernetes.io/warn-version": "latest",
        "pod-security.kubernetes.io/audit": audit or enforce,
        "pod-security.kubernetes.io/audit-version": "latest",
    }
    metadata: dict[str, Any] = {"name": name, "labels": {**dict(labels or {}), **pod_security}}
    if exception_reason:
        metadata["annotations"] = {SECURITY_EXCEPTION_ANNOTATION: exception_reason}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def register_objects(
    name: str,
    objs: Sequence[Any],
    *,
    parent: pulumi.Resource,
    provider: k8s.Provider,
    depends_on: Sequence[pulumi.Resource] | None = None,
) -> ConfigGroup:
    """Register rendered objects as one ConfigGroup on the explicit provider.

    The offline `plan` reads each ConfigGroup's `objs` input and writes it as manifests, which is
    why every object goes through here rather than through typed resource classes.
    """
    return ConfigGroup(
        name,
        objs=list(objs),
        opts=pulumi.ResourceOptions(
            parent=parent,
            provider=provider,
            depends_on=list(depends_on) if depends_on else None,
        ),
    )
