"""The scheduler's admission rules, as pure functions over plain pod specs and a node model.

Each rule follows the Kubernetes source it names, so the plan's admission check refuses exactly
what the real scheduler and API server would:

- taints and tolerations: `k8s.io/api/core/v1` `Toleration.ToleratesTaint` and the scheduler's
  TaintToleration filter (`pkg/scheduler/framework/plugins/tainttoleration`), which only considers
  `NoSchedule` and `NoExecute` taints (`PreferNoSchedule` is a scoring hint);
- node selection: `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`
  (`GetRequiredNodeAffinity(pod).Match(node)`): every `nodeSelector` label must match exactly AND
  at least one required `nodeSelectorTerm` must match; a term ANDs its expressions, and an empty
  term matches nothing; `NotIn`/`DoesNotExist` match a missing label;
- resources: the NodeResourcesFit filter (`computePodResourceRequest`): a container's request
  defaults to its limit, a pod requests the larger of its containers' sum and any one init
  container, plus the RuntimeClass `overhead`;
- RuntimeClass: the RuntimeClass admission plugin (`plugin/pkg/admission/runtimeclass`) refuses a
  pod naming a RuntimeClass that does not exist and merges the class's `scheduling` nodeSelector
  and tolerations into the pod.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

FILTERED_EFFECTS = ("NoSchedule", "NoExecute")
"""Taint effects the scheduler's TaintToleration filter enforces."""


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass(frozen=True)
class RuntimeClassModel:
    """A RuntimeClass as the admission plugin and the kubelet see it."""

    name: str
    handler: str
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Mapping[str, Any]] = ()
    overhead: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> RuntimeClassModel:
        scheduling = obj.get("scheduling") or {}
        return cls(
            name=obj["metadata"]["name"],
            handler=obj["handler"],
            node_selector=dict(scheduling.get("nodeSelector") or {}),
            tolerations=list(scheduling.get("tolerations") or []),
            overhead=dict((obj.get("overhead") or {}).get("podFixed") or {}),
        )


@dataclass(frozen=True)
class NodeModel:
    """A node as the scheduler sees it, plus the container runtime handlers it has."""

    name: str
    role: str
    """`control-plane` or `gpu-worker` (for reports)."""
    labels: Mapping[str, str]
    taints: Sequence[Taint]
    allocatable: Mapping[str, Fraction]
    runtime_handlers: frozenset[str] = frozenset({"runc"})


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """`Toleration.ToleratesTaint`: empty effect matches every effect, empty key (with Exists)
    every key; operator Exists matches any value, Equal (or empty) needs the same value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if key and key != taint.key:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == taint.value
    return False  # Lt/Gt are alpha (TaintTolerationComparisonOperators); we render none


def untolerated_taints(tolerations: Iterable[Mapping[str, Any]], taints: Iterable[Taint]) -> list[Taint]:
    """The node's scheduling-relevant taints no toleration matches."""
    tolerations = list(tolerations)
    return [
        taint
        for taint in taints
        if taint.effect in FILTERED_EFFECTS and not any(tolerates(t, taint) for t in tolerations)
    ]


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = expression["key"], expression["operator"]
    values = list(expression.get("values") or [])
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            label, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return label > bound if operator == "Gt" else label < bound
    raise ValueError(f"unknown node selector operator {operator!r}")


def _term_matches(term: Mapping[str, Any], node: NodeModel) -> bool:
    expressions = list(term.get("matchExpressions") or [])
    fields = list(term.get("matchFields") or [])
    if not expressions and not fields:
        return False  # an empty term matches no objects (NodeSelectorTerm's contract)
    for expression in fields:
        # Only metadata.name is a supported field.
        if not _expression_matches(expression, {"metadata.name": node.name}):
            return False
    return all(_expression_matches(e, node.labels) for e in expressions)


def node_selection_problem(pod: Mapping[str, Any], node: NodeModel) -> str | None:
    """Why `nodeSelector` or required node affinity rejects `node`, or None."""
    for key, value in (pod.get("nodeSelector") or {}).items():
        if node.labels.get(key) != value:
            found = f"has {key}={node.labels[key]!r}" if key in node.labels else f"has no label {key}"
            return f"nodeSelector {key}={value!r}: node {found}"
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is not None:
        terms = list(required.get("nodeSelectorTerms") or [])
        if not any(_term_matches(term, node) for term in terms):
            return "required node affinity: no nodeSelectorTerm matches the node's labels"
    return None


_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")
_SUFFIXES = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
}


def quantity(value: Any) -> Fraction:
    """A Kubernetes resource quantity (`500m`, `8Gi`, `2`, 1.5) as an exact number."""
    if isinstance(value, (int, float)):
        return Fraction(value)
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    number, suffix = match.groups()
    if suffix[:1] in ("e", "E"):
        return Fraction(number) * Fraction(10) ** int(suffix[1:])
    if suffix not in _SUFFIXES:
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    return Fraction(number) * _SUFFIXES[suffix]


def _container_requests(container: Mapping[str, Any]) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: quantity(value) for name, value in merged.items()}


def pod_requests(pod: Mapping[str, Any], overhead: Mapping[str, Any] | None = None) -> dict[str, Fraction]:
    """What the scheduler reserves for the pod: max(sum of containers, each init container)
    + overhead, and one `pods` slot."""
    total: dict[str, Fraction] = {}
    for container in pod.get("containers") or []:
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, Fraction(0)) + amount
    for container in pod.get("initContainers") or []:
        for name, amount in _container_requests(container).items():
            total[name] = max(total.get(name, Fraction(0)), amount)
    for name, amount in (overhead or {}).items():
        total[name] = total.get(name, Fraction(0)) + quantity(amount)
    total["pods"] = Fraction(1)
    return total


def with_runtime_class(pod: Mapping[str, Any], runtime_classes: Mapping[str, RuntimeClassModel]) -> dict[str, Any]:
    """The pod after the RuntimeClass admission plugin: scheduling merged in. Raises ValueError
    (the API server's refusal) when the class does not exist or its selector conflicts."""
    name = pod.get("runtimeClassName")
    if not name:
        return dict(pod)
    runtime_class = runtime_classes.get(name)
    if runtime_class is None:
        raise ValueError(f"RuntimeClass {name!r} does not exist: the API server refuses the pod")
    selector = dict(pod.get("nodeSelector") or {})
    for key, value in runtime_class.node_selector.items():
        if key in selector and selector[key] != value:
            raise ValueError(f"nodeSelector {key}={selector[key]!r} conflicts with RuntimeClass {name!r}")
        selector[key] = value
    merged = dict(pod)
    if selector:
        merged["nodeSelector"] = selector
    merged["tolerations"] = [*(pod.get("tolerations") or []), *runtime_class.tolerations]
    return merged


def placement_problem(
    pod: Mapping[str, Any], node: NodeModel, runtime_classes: Mapping[str, RuntimeClassModel]
) -> str | None:
    """Why the (RuntimeClass-merged) pod cannot be placed on `node` whatever is free, or None."""
    selection = node_selection_problem(pod, node)
    if selection:
        return selection
    untolerated = untolerated_taints(pod.get("tolerations") or [], node.taints)
    if untolerated:
        return "untolerated taint " + ", ".join(str(t) for t in untolerated)
    name = pod.get("runtimeClassName")
    if name and runtime_classes[name].handler not in node.runtime_handlers:
        return f"no containerd handler {runtime_classes[name].handler!r} for RuntimeClass {name!r}"
    return None


def shortfall(requests: Mapping[str, Fraction], free: Mapping[str, Fraction]) -> str | None:
    """The first resource `free` cannot cover, described, or None when the pod fits."""
    for name, amount in sorted(requests.items()):
        if amount > free.get(name, Fraction(0)):
            have = free.get(name, Fraction(0))
            millis = name == "cpu" and (amount.denominator != 1 or have.denominator != 1)
            return f"{name}: requests {format_amount(name, amount, millis)}, {format_amount(name, have, millis)} free"
    return None


def format_amount(name: str, amount: Fraction, millis: bool = False) -> str:
    """`8192Mi` for memory, `1500m` for CPU when asked (or fractional), else a plain number."""
    if name == "memory" or name.endswith("storage"):
        return f"{float(amount / 2**20):.0f}Mi"
    if name == "cpu" and (millis or amount.denominator != 1):
        return f"{float(amount * 1000):.0f}m"
    return f"{float(amount):g}"
