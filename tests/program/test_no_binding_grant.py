"""Issue 53 item 10: no role the stack creates lets anyone bind a pod to a node by hand.

The job namespaces' admission policy refuses `spec.nodeName` on create (components/k8s/jobs/
pod_policy.py); a Binding (`pods/binding` or `bindings`, verb `create`) places a pod on a node
without that field, so whoever may create one could put a job pod on a control-plane node. In
Kubernetes only `system:kube-scheduler` (and `cluster-admin`) may (bootstrappolicy/policy.go);
this holds the stack's own roles (the MPI Operator's, Prometheus', the control-plane join's, ...)
to the same, wildcards included.
"""

from __future__ import annotations

from typing import Any

from stacks.tools.plan.command import kubernetes_objects
from stacks.tools.plan.mock_runtime import ProgramRun

ROLE_KINDS = ("ClusterRole", "Role")


def _grants_binding(rule: dict[str, Any]) -> bool:
    groups = rule.get("apiGroups") or []
    resources = rule.get("resources") or []
    verbs = rule.get("verbs") or []
    return (
        ("" in groups or "*" in groups)
        and bool({"bindings", "pods/binding", "*", "pods/*"} & set(resources))
        and bool({"create", "*"} & set(verbs))
    )


def test_no_role_of_the_stack_grants_creating_a_binding(dev_run: ProgramRun) -> None:
    roles = [
        obj
        for _, objects in kubernetes_objects(dev_run.resources)
        for obj in objects
        if isinstance(obj, dict) and obj.get("kind") in ROLE_KINDS
    ]
    assert len(roles) >= 3, "the plan should hold the add-ons' roles (MPI Operator, monitoring, ...)"
    granting = [
        (role["kind"], role["metadata"]["name"], rule)
        for role in roles
        for rule in role.get("rules") or []
        if _grants_binding(rule)
    ]
    assert granting == [], granting


def test_the_check_sees_a_grant() -> None:
    assert _grants_binding({"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]})
    assert _grants_binding({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})
    assert not _grants_binding({"apiGroups": [""], "resources": ["bindings"], "verbs": ["get", "list"]})
