"""The scheduler's rules, table-driven against Kubernetes' own semantics.

Tolerations: `k8s.io/api/core/v1` `Toleration.ToleratesTaint` (empty effect = every effect; empty
key with Exists = every taint; Exists ignores the value; Equal or no operator compares values,
an absent value being "") and the TaintToleration filter, which ignores `PreferNoSchedule`.
Node selection: `component-helpers/scheduling/corev1/nodeaffinity` (nodeSelector AND any required
term; a term ANDs its expressions; an empty term matches nothing; NotIn/DoesNotExist match an
absent label; Gt/Lt compare integers). Requests: NodeResourcesFit's `computePodResourceRequest`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from stacks.tools.plan.admission.rules import (
    NodeModel,
    RuntimeClassModel,
    Taint,
    node_selection_problem,
    placement_problem,
    pod_requests,
    quantity,
    tolerates,
    untolerated_taints,
    with_runtime_class,
)

CP = Taint(key="node-role.kubernetes.io/control-plane", effect="NoSchedule")
GPU = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
EVICT = Taint(key="dedicated", value="db", effect="NoExecute")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        # Equal (explicit or by default) compares values; a missing value is "".
        ({"key": CP.key, "operator": "Equal", "value": "", "effect": "NoSchedule"}, CP, True),
        ({"key": CP.key, "effect": "NoSchedule"}, CP, True),
        ({"key": GPU.key, "effect": "NoSchedule"}, GPU, False),
        ({"key": GPU.key, "operator": "Equal", "value": "present", "effect": "NoSchedule"}, GPU, True),
        ({"key": GPU.key, "operator": "Equal", "value": "absent", "effect": "NoSchedule"}, GPU, False),
        # Exists ignores the value.
        ({"key": GPU.key, "operator": "Exists", "effect": "NoSchedule"}, GPU, True),
        ({"key": GPU.key, "operator": "Exists"}, GPU, True),
        # Effect must match unless empty.
        ({"key": GPU.key, "operator": "Exists", "effect": "NoExecute"}, GPU, False),
        ({"key": GPU.key, "operator": "Exists", "effect": "PreferNoSchedule"}, GPU, False),
        # Empty key with Exists tolerates every taint; with an effect, every taint of that effect.
        ({"operator": "Exists"}, CP, True),
        ({"operator": "Exists"}, EVICT, True),
        ({"operator": "Exists", "effect": "NoSchedule"}, EVICT, False),
        ({"operator": "Exists", "effect": "NoExecute"}, EVICT, True),
        # Keys are compared exactly.
        ({"key": "node-role.kubernetes.io/master", "operator": "Exists"}, CP, False),
        # Operators we do not know (alpha Lt/Gt) tolerate nothing.
        ({"key": GPU.key, "operator": "Gt", "value": "1"}, GPU, False),
    ],
)
def test_toleration_matching(toleration: dict[str, Any], taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_prefer_no_schedule_taints_never_filter() -> None:
    soft = Taint(key="soft", effect="PreferNoSchedule")
    assert untolerated_taints([], [soft, CP]) == [CP]
    assert untolerated_taints([{"operator": "Exists"}], [soft, CP, GPU, EVICT]) == []


NODE = NodeModel(
    name="worker-1",
    role="gpu-worker",
    labels={"nvidia.com/gpu.present": "true", "kubernetes.io/os": "linux", "gpus": "4", "tier": ""},
    taints=(),
    allocatable={"cpu": Fraction(4), "memory": Fraction(8 * 2**30), "pods": Fraction(110)},
)


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
        }
    }


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return {"matchExpressions": [expression]}


@pytest.mark.parametrize(
    ("pod", "admitted"),
    [
        ({}, True),
        ({"nodeSelector": {"nvidia.com/gpu.present": "true"}}, True),
        ({"nodeSelector": {"nvidia.com/gpu.present": "false"}}, False),
        ({"nodeSelector": {"node-role.kubernetes.io/control-plane": ""}}, False),
        ({"nodeSelector": {"tier": ""}}, True),
        (_required(_expr("kubernetes.io/os", "In", "linux", "windows")), True),
        (_required(_expr("kubernetes.io/os", "In", "windows")), False),
        (_required(_expr("kubernetes.io/os", "NotIn", "windows")), True),
        (_required(_expr("absent", "NotIn", "x")), True),  # NotIn matches a missing label
        (_required(_expr("absent", "DoesNotExist")), True),
        (_required(_expr("absent", "Exists")), False),
        (_required(_expr("gpus", "Gt", "3")), True),
        (_required(_expr("gpus", "Lt", "4")), False),
        (_required(_expr("tier", "Gt", "3")), False),  # not an integer: no match
        # Terms are ORed, expressions inside one term ANDed.
        (_required(_expr("kubernetes.io/os", "In", "windows"), _expr("gpus", "Exists")), True),
        (
            _required(
                {
                    "matchExpressions": [
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {"key": "gpus", "operator": "DoesNotExist"},
                    ]
                }
            ),
            False,
        ),
        (_required({}), False),  # an empty term matches nothing
        (_required(), False),  # no terms: nothing matches
        (_required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-1"]}]}), True),
        (_required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-2"]}]}), False),
        # nodeSelector AND affinity.
        ({**_required(_expr("gpus", "Exists")), "nodeSelector": {"tier": "x"}}, False),
        # Preferred affinity never filters.
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 1, "preference": _expr("absent", "Exists")}
                        ]
                    }
                }
            },
            True,
        ),
    ],
)
def test_node_selection(pod: dict[str, Any], admitted: bool) -> None:
    assert (node_selection_problem(pod, NODE) is None) is admitted


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        (1, Fraction(1)),
        ("8Gi", Fraction(8 * 2**30)),
        ("512Mi", Fraction(512 * 2**20)),
        ("1G", Fraction(10**9)),
        ("1.5", Fraction(3, 2)),
        ("1e3", Fraction(1000)),
    ],
)
def test_quantities(text: Any, value: Fraction) -> None:
    assert quantity(text) == value


def test_quantities_reject_nonsense() -> None:
    with pytest.raises(ValueError):
        quantity("8GB")


def test_pod_requests_default_to_limits_and_take_the_larger_init_container() -> None:
    pod = {
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": 2, "cpu": "2"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}}},
        ],
    }
    requests = pod_requests(pod, {"cpu": "250m"})
    assert requests["cpu"] == Fraction(3) + Fraction(1, 4)  # init 3 > 1.5, plus overhead
    assert requests["memory"] == Fraction(2 * 2**30)
    assert requests["nvidia.com/gpu"] == 2  # limit only: the request defaults to it
    assert requests["pods"] == 1


NVIDIA = RuntimeClassModel(name="nvidia", handler="nvidia", node_selector={"nvidia.com/gpu.present": "true"})


def test_runtime_class_must_exist_and_its_scheduling_is_merged() -> None:
    with pytest.raises(ValueError, match="does not exist"):
        with_runtime_class({"runtimeClassName": "nvidia"}, {})
    merged = with_runtime_class(
        {"runtimeClassName": "nvidia", "tolerations": [{"operator": "Exists"}]}, {"nvidia": NVIDIA}
    )
    assert merged["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert merged["tolerations"] == [{"operator": "Exists"}]
    with pytest.raises(ValueError, match="conflicts"):
        with_runtime_class(
            {"runtimeClassName": "nvidia", "nodeSelector": {"nvidia.com/gpu.present": "no"}}, {"nvidia": NVIDIA}
        )


def test_a_node_without_the_handler_refuses_the_runtime_class() -> None:
    pod = with_runtime_class({"runtimeClassName": "nvidia"}, {"nvidia": NVIDIA})
    assert (
        placement_problem(pod, NODE, {"nvidia": NVIDIA}) == "no containerd handler 'nvidia' for RuntimeClass 'nvidia'"
    )
    with_handler = NodeModel(**{**NODE.__dict__, "runtime_handlers": frozenset({"runc", "nvidia"})})
    assert placement_problem(pod, with_handler, {"nvidia": NVIDIA}) is None


def test_a_tainted_node_names_the_taint() -> None:
    tainted = NodeModel(**{**NODE.__dict__, "taints": (GPU,)})
    assert placement_problem({}, tainted, {}) == "untolerated taint nvidia.com/gpu=present:NoSchedule"
