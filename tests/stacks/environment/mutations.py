"""Mutations of a stack's environment, generated from the model's own fields.

Every leaf key the model knows (walked through nested models and lists of them) gets values of
the wrong type, values at and past its bounds, and values in the wrong format; optional keys are
also removed. Generated, not listed: a key added to the model tomorrow is mutated too.
"""

from __future__ import annotations

import copy
import random
import types
import typing
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network
from typing import Any, Literal

from annotated_types import Ge, Le
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from stacks.environment.model import Environment

KeyPath = tuple[str | int, ...]
Mutation = tuple[str, KeyPath, Any]
"""(description, path, new value); the value `REMOVE` deletes the key."""

REMOVE = object()

_STRINGS = [
    "",
    "x",
    "UPPER",
    "a_b",
    "a" * 64,
    "a" * 90,
    "https://k8s.example.com:6443/x",
    "1.2",
    "has space",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "ssh-dss AAAAB3Nza",
    "0130",
    "lab.example.com",
    "cluster.local",
    "10.10.0.60",
    "vmk1",
    "VM Network",
    "grid_t4-16q",
    "nvidia_l40s-48c",
    "grid_a100-3-20c",
    "15AD",
    "latest",
    "repo/image:latest",
    "repo/image:1.0",
    "kube-system",
    "6.0.0",
    "7.0.3",
    "v3.29.0",
    "v4.0.0",
    "1.31.0",
    "1.35.0",
    "8Gi",
    "-1",
]
_ADDRESSES = [
    "10.10.0.1",
    "10.10.0.60",
    "10.10.0.255",
    "127.0.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "169.254.1.1",
    "192.168.0.24",
    "192.168.0.99",
    "192.168.0.255",
    "10.96.0.10",
    "10.244.0.5",
    "10.0.0.5",
    "not-an-ip",
    "10.10.0.1/24",
]
_NETWORKS = [
    "10.96.0.0/11",
    "10.96.0.0/29",
    "10.96.0.0/28",
    "10.244.0.0/25",
    "10.244.0.0/23",
    "10.244.0.0/24",
    "10.10.0.0/16",
    "10.10.0.0/30",
    "192.168.0.0/16",
    "192.168.0.0/31",
    "0.0.0.0/0",
    "10.0.0.1/24",
    "10.200.0.0/16",
    "fd00::/64",
]
_WRONG_TYPES: list[Any] = [None, True, 12, 1.5, "text", [], {}]


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(inner type, optional) for `T | None`."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _bounds(info: FieldInfo) -> tuple[int | None, int | None]:
    low = next((m.ge for m in info.metadata if isinstance(m, Ge)), None)
    high = next((m.le for m in info.metadata if isinstance(m, Le)), None)
    return low, high  # type: ignore[return-value]


def _scalar_values(annotation: Any, info: FieldInfo | None) -> list[Any]:
    base = (typing.get_origin(annotation) is typing.Annotated and typing.get_args(annotation)[0]) or annotation
    if typing.get_origin(base) is Literal:
        return [*typing.get_args(base), "bogus"]
    if base is bool:
        return [True, False, "yes", 1]
    if base is int:
        low, high = _bounds(info) if info is not None else (None, None)
        values: list[Any] = [0, 1, -1, 10, 13, 16, 22, 23, 9000, 10**6, "12", 1.5]
        for bound in (low, high):
            if bound is not None:
                values += [bound - 1, bound, bound + 1]
        return values
    if base is IPv4Address:
        return list(_ADDRESSES)
    if base is IPv4Network:
        return list(_NETWORKS)
    return [*list(_STRINGS), 12, 1.34]


def leaf_mutations(model: type[BaseModel], raw: Any, where: KeyPath = ()) -> Iterator[Mutation]:
    """Every mutation of every key under `model`, as it appears in `raw` (a stack's mapping)."""
    raw = raw if isinstance(raw, dict) else {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = (*where, key)
        annotation, optional = _unwrap(info.annotation)
        present = key in raw
        if present and not info.is_required():
            yield f"remove {key}", path, REMOVE
        if optional or not info.is_required():
            yield f"{key}: null", path, None
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            for value in ("text", [], {}):
                yield f"{key}: {value!r}", path, value
            yield from leaf_mutations(annotation, raw.get(key, {}), path)
            continue
        if typing.get_origin(annotation) is list:
            (item,) = typing.get_args(annotation)
            item_type, _ = _unwrap(item)
            current = raw.get(key) if isinstance(raw.get(key), list) else []
            yield f"{key}: []", path, []
            if current:
                yield f"{key}: first twice", path, [current[0], *current]
                yield f"{key}: reversed", path, list(reversed(current))
            if isinstance(item_type, type) and issubclass(item_type, BaseModel):
                for index in sorted({0, len(current) - 1}) if current else []:
                    yield from leaf_mutations(item_type, current[index], (*path, index))
            else:
                for value in _scalar_values(item, None):
                    yield f"{key}[0]: {value!r}", (*path, 0), value
                    yield f"{key}: [{value!r}]", path, [value]
                yield f"{key}: four items", path, (current * 4)[:4] if current else ["x", "y", "z", "w"]
            for value in ("text", 12):
                yield f"{key}: {value!r}", path, value
            continue
        for value in _scalar_values(info.annotation if not optional else annotation, info):
            yield f"{key}: {value!r}", path, value
        for value in _WRONG_TYPES[1:]:
            yield f"{key}: {value!r}", path, value


def apply(raw: dict[str, Any], path: KeyPath, value: Any) -> dict[str, Any] | None:
    """A deep copy of `raw` with the mutation applied; None when the path does not exist."""
    edited = copy.deepcopy(raw)
    target: Any = edited
    for part in path[:-1]:
        if isinstance(part, int):
            if not isinstance(target, list) or part >= len(target):
                return None
            target = target[part]
        else:
            if not isinstance(target, dict):
                return None
            target = target.setdefault(part, {})
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(target, list):
            return None
        if last >= len(target):
            return None
        if value is REMOVE:
            del target[last]
        else:
            target[last] = copy.deepcopy(value)
    elif isinstance(target, dict):
        if value is REMOVE:
            target.pop(last, None)
        else:
            target[last] = copy.deepcopy(value)
    else:
        return None
    return edited


def all_mutations(raw: dict[str, Any]) -> list[Mutation]:
    return list(leaf_mutations(Environment, raw))


def pairs(mutations: list[Mutation], count: int, seed: int) -> list[tuple[Mutation, Mutation]]:
    """`count` seeded pairs of mutations, for the interactions single mutations cannot reach."""
    rng = random.Random(seed)
    return [(rng.choice(mutations), rng.choice(mutations)) for _ in range(count)]


__all__ = ["REMOVE", "all_mutations", "apply", "leaf_mutations", "pairs"]
