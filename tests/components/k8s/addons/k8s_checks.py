"""Checks every rendered Kubernetes object must pass, shared by the add-on and job tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes_validate

from components.k8s.objects import image_is_pinned

K8S_VERSION = "1.37"
"""The Kubernetes version the objects are validated against: the newest the bootstrap supports
(kubernetes-validate 1.37.0 ships the 1.37 schemas); tests/program/test_plan_manifests.py checks
each shipped stack's plan at the stack's own version."""

POD_SECURITY_LABELS = (
    "pod-security.kubernetes.io/enforce",
    "pod-security.kubernetes.io/warn",
    "pod-security.kubernetes.io/audit",
)


def validate_strict(obj: dict[str, Any]) -> None:
    """Raise with the field path when `obj` is not a valid object of its kind (unknown fields
    included)."""
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        where = ".".join(str(p) for p in error.path)
        raise AssertionError(f"{obj['kind']}/{obj['metadata'].get('name')}: {where}: {error.message}") from None


def pod_specs(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every pod spec inside a workload or MPIJob."""
    spec = obj.get("spec", {})
    if "template" in spec:
        yield spec["template"]["spec"]
    for replica in spec.get("mpiReplicaSpecs", {}).values():
        yield replica["template"]["spec"]


def containers(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for pod in pod_specs(obj):
        yield from pod.get("initContainers", [])
        yield from pod["containers"]


def check_policy(objs: list[dict[str, Any]]) -> None:
    """House rules: no privileged container, pinned images, Pod Security labels on namespaces."""
    for obj in objs:
        for container in containers(obj):
            security = container.get("securityContext", {})
            assert security.get("privileged") is not True, (obj["kind"], container["name"])
            assert image_is_pinned(container["image"]), container["image"]
        if obj["kind"] == "Namespace":
            labels = obj["metadata"]["labels"]
            for label in POD_SECURITY_LABELS:
                assert label in labels, (obj["metadata"]["name"], label)
            if labels["pod-security.kubernetes.io/enforce"] == "privileged":
                assert obj["metadata"]["annotations"]["gpucluster.io/pod-security-exception"]
