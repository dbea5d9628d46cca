"""A small validator for Kubernetes structural schemas (a CRD's `openAPIV3Schema`).

What the API server checks for a custom resource, minus CEL rules: types (incl. int32/int64
ranges and `x-kubernetes-int-or-string`), `required`, `enum`, `pattern`, `anyOf`, and, like the
server's pruning but stricter, any field the schema does not declare is an *error* (unless the
schema says `x-kubernetes-preserve-unknown-fields`). The server would silently drop such a field;
for us it is a typo that never reaches the operator.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from components.k8s.addons.mpi_operator import MPI_OPERATOR_VERSION
from components.k8s.vendored import MPI_OPERATOR_CRD, pinned

MPIJOB_CRD = pinned(MPI_OPERATOR_CRD, MPI_OPERATOR_VERSION).file
"""The CRD the program applies: the vendored copy of the pinned release (manifests/), which is
in every clone, so no test skips for want of it."""

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def load_crd_schema(path: Path, version: str) -> dict[str, Any]:
    crd = yaml.safe_load(path.read_text())
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(f"{path.name} has no version {version}")


def _type_errors(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [f"{path}: expected integer or string, got {type(value).__name__}"]
        return []
    expected = schema.get("type")
    if expected is None:
        return []
    ok = {
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
    }.get(expected, False)
    if not ok:
        return [f"{path}: expected {expected}, got {type(value).__name__}"]
    if expected == "integer" and schema.get("format") in _INT_RANGES:
        low, high = _INT_RANGES[schema["format"]]
        if not low <= value <= high:
            return [f"{path}: {value} out of {schema['format']} range"]
    return []


def validate(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """All the ways `value` violates `schema`; an empty list means valid."""
    errors = _type_errors(schema, value, path or "<root>")
    if errors:
        return errors
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not one of {schema['enum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if "anyOf" in schema and not any(not validate(s, value, path) for s in schema["anyOf"]):
        errors.append(f"{path}: matches none of anyOf")
    if isinstance(value, dict):
        properties: dict[str, Any] = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}.{key}: required field missing")
        for key, item in value.items():
            child = f"{path}.{key}"
            if key in properties:
                errors += validate(properties[key], item, child)
            elif isinstance(additional, dict):
                errors += validate(additional, item, child)
            elif additional is True or schema.get("x-kubernetes-preserve-unknown-fields"):
                continue
            elif properties or additional is False or schema.get("type") == "object":
                # `metadata: {type: object}` at the root is validated by the server's ObjectMeta
                # rules, not by the CRD schema; everything else declares its fields.
                if path == ".metadata":
                    continue
                errors.append(f"{child}: unknown field")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            errors += validate(schema["items"], item, f"{path}[{index}]")
    return errors
