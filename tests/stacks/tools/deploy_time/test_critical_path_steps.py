"""The critical path `plan` prints never shows one step twice (issue 55 item 6: it read
"control-plane-join-reader -> control-plane-join-reader", a Role and its RoleBinding)."""

from __future__ import annotations

from stacks.tools.plan.deploy_time.durations import Durations
from stacks.tools.plan.deploy_time.estimate import estimate, summary_lines


def _object(kind: str, name: str, *after: str, group: str = "rbac.authorization.k8s.io/v1") -> dict[str, object]:
    urn = f"urn:pulumi:s::p::kubernetes:{group}:{kind}::{name}-{len(after)}"
    return {
        "urn": urn,
        "type": f"kubernetes:{group}:{kind}",
        "name": name,
        "custom": True,
        "dependencies": list(after),
        "inputs": {},
    }


def test_a_role_and_its_binding_of_one_name_are_two_named_steps() -> None:
    role = _object("Role", "control-plane-join-reader")
    binding = _object("RoleBinding", "control-plane-join-reader", str(role["urn"]))
    result = estimate([role, binding], Durations(), engine=None)
    path = result.path_labels(result.pulumi_up)
    assert path == [
        "Kubernetes objects: Role control-plane-join-reader",
        "Kubernetes objects: RoleBinding control-plane-join-reader",
    ]
    [line] = [line for line in summary_lines(result) if "critical path" in line]
    assert line.endswith("Role control-plane-join-reader -> Kubernetes objects: RoleBinding control-plane-join-reader")


def test_steps_of_one_label_in_a_row_are_one_step_with_their_count() -> None:
    # The same kind and name in two namespaces, one after the other: nothing tells them apart.
    first = _object("Secret", "join-token", group="core/v1")
    second = _object("Secret", "join-token", str(first["urn"]), group="core/v1")
    result = estimate([first, second], Durations(), engine=None)
    assert result.path_labels(result.pulumi_up) == ["Kubernetes objects: Secret join-token (x2)"]
