"""`plan --against`: the Kubernetes objects a change rewrites, in a reviewer's words.

A scale out changes more than nodes: the fabric check's MPIJob runs one rank per GPU worker, so
two more workers turn its `mpirun -np 4` into `-np 6` and its Worker replicas from 4 to 6. The
objects are the `objs` of the program's ConfigGroups (what `pulumi up` applies), matched by kind,
namespace and name between the two plans.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"
_NP = re.compile(r"(?<!\S)-np\s+(\d+)")
_SHOWN_PATHS = 3


class _Planned(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def inputs(self) -> Mapping[str, Any]: ...


def kubernetes_objects(resources: Iterable[_Planned]) -> dict[str, Mapping[str, Any]]:
    """`Kind namespace/name` -> the object, for every object of the plan's ConfigGroups."""
    found: dict[str, Mapping[str, Any]] = {}
    for resource in resources:
        objs = resource.inputs.get("objs") if resource.type == CONFIG_GROUP else None
        for obj in objs if isinstance(objs, list) else ():
            if isinstance(obj, Mapping) and isinstance(obj.get("metadata"), Mapping):
                meta = obj["metadata"]
                where = f"{meta['namespace']}/" if meta.get("namespace") else ""
                found[f"{obj.get('kind')} {where}{meta.get('name')}"] = obj
    return found


def _flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key in sorted(value):
            yield from _flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _flatten(item, f"{prefix}[{index}]")
    else:
        yield prefix, value


def _number(value: Any) -> Any:
    """4.0 -> 4: the mock runtime carries every number as a float."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _mpijob_words(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    words = []
    replicas = [
        (obj.get("spec", {}).get("mpiReplicaSpecs", {}).get("Worker", {}).get("replicas")) for obj in (old, new)
    ]
    if replicas[0] != replicas[1]:
        words.append(f"Worker replicas {_number(replicas[0])} -> {_number(replicas[1])}")
    ranks = [sorted(set(_NP.findall(str(obj.get("spec", {}))))) for obj in (old, new)]
    if ranks[0] != ranks[1]:
        words.append(f"`mpirun -np {','.join(ranks[0]) or '?'}` -> `-np {','.join(ranks[1]) or '?'}`")
    return words


def workload_changes(before: Iterable[_Planned], after: Iterable[_Planned]) -> list[str]:
    """One line per Kubernetes object added, removed or changed, sorted by kind and name."""
    old, new = kubernetes_objects(before), kubernetes_objects(after)
    lines = []
    for key in sorted(old.keys() | new.keys()):
        if key not in old:
            lines.append(f"{key}: added")
        elif key not in new:
            lines.append(f"{key}: removed")
        elif old[key] != new[key]:
            words = _mpijob_words(old[key], new[key]) if key.startswith("MPIJob ") else []
            if not words:
                was, now = dict(_flatten(old[key])), dict(_flatten(new[key]))
                paths = sorted(path for path in was.keys() | now.keys() if was.get(path) != now.get(path))
                more = f" and {len(paths) - _SHOWN_PATHS} more" if len(paths) > _SHOWN_PATHS else ""
                words = [f"changes {', '.join(paths[:_SHOWN_PATHS])}{more}"]
            lines.append(f"{key}: {'; '.join(words)}")
    return lines
