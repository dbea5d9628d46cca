"""Field errors as one line each, with the fix a person needs: the key path, what is wrong, and a
hint where we can guess the intent (the nearest key for a misspelt one, "quote it" for a version
YAML read as a number, spaces instead of a tab).
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Sequence
from typing import Any

import pydantic
import yaml
from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from stacks.environment.model import Environment
from stacks.environment.registry import format_path

_FIXES = {
    "extra_forbidden": "unknown key; remove it or fix its spelling",
    "missing": "required key is missing; add it",
}


def describe_validation_error(error: pydantic.ValidationError, root: str, raw: Any) -> list[str]:
    lines = []
    for item in error.errors(include_url=False):
        loc = item["loc"]
        path = format_path(root, loc)
        message = _FIXES.get(item["type"])
        if message is None:
            message = str(item["msg"])
            if message.startswith("Value error, "):
                message = message[len("Value error, ") :]
            if item["type"] != "value_error" and not isinstance(item.get("input"), dict | list | None):
                message = f"{message} (got {item['input']!r})"
        if item["type"] == "extra_forbidden" and loc:
            message = f"{message}{_nearest_key_hint(loc)}; see `python -m stacks schema` for the keys allowed here"
        if item["type"] == "string_type" and isinstance(item.get("input"), int | float) and not isinstance(item.get("input"), bool):
            hint = _version_hint(item["input"]) if tuple(loc[-2:]) in _FULL_VERSION_KEYS else None
            message = f"{message}; {hint or _quote_hint(item['input'])}"
        if item["type"] == "int_parsing" and loc and isinstance(loc[-1], str):
            message += _unit_hint(loc[-1], item.get("input"))
        if item["type"] == "list_type" and isinstance(item.get("input"), str | int | float):
            message += f"; write it as a YAML list, even of one item: [{item['input']}]"
        lines.append(f"{path}: {message}")
    return lines


_UNITS = {"Mb": "MiB", "Gb": "GiB"}
"""A size key's suffix (`memoryMb`, `diskGb`) -> the unit its plain number is in."""
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT])(?:i?B?)?\s*$", re.IGNORECASE)
_POWER = {"K": 0, "M": 1, "G": 2, "T": 3}


def _unit_hint(key: str, value: Any) -> str:
    """`memoryMb: 24GB`: the key's unit, and the number to write (24576)."""
    unit = next((name for suffix, name in _UNITS.items() if key.endswith(suffix)), None)
    if unit is None or not isinstance(value, str):
        return ""
    hint = f"; {key} is a plain number of {unit} (the unit is in the key's name)"
    size = _SIZE.match(value)
    if size is None:
        return hint
    number = float(size.group(1)) * 1024 ** (_POWER[size.group(2).upper()] - _POWER[unit[0]])
    return f"{hint}: write {key}: {int(number)}" if number >= 1 and number.is_integer() else hint


_FULL_VERSION_KEYS = {("kubernetes", "version")}
"""Keys whose value is 1.MINOR.PATCH (fields.KubernetesVersion): "quote it" alone would be refused next."""


def _version_hint(number: float) -> str | None:
    """`version: 1.36` -> write "1.36.0"-style; `version: 1.30`, read as 1.3 -> say so, and "1.30.0"."""
    if not isinstance(number, float):
        return None
    major, _, minor = repr(number).partition(".")
    if not minor.isdigit():
        return None
    if len(minor) == 1:  # YAML dropped a trailing zero: no supported minor has one digit
        return (
            f"YAML read an unquoted version as the number {number} (1.{minor}0 loses its trailing zero): write the "
            f'whole version in quotes, 1.MINOR.PATCH, e.g. "{major}.{minor}0.0" or the patch release you run'
        )
    return (
        f"YAML read an unquoted {number} as a number: write the whole version in quotes, 1.MINOR.PATCH, e.g. "
        f'"{major}.{minor}.0" or the patch release you run ("{major}.{minor}" alone is not a release)'
    )


def _quote_hint(number: float) -> str:
    if isinstance(number, float):
        return (
            f"quote it (\"{number}\", or the full version such as \"1.34.2\"): YAML reads an unquoted {number} as a "
            "number and drops trailing zeros (1.30 becomes 1.3)"
        )
    return f"quote it (\"{number}\"): YAML reads it as a number"


def _nearest_key_hint(loc: Sequence[str | int]) -> str:
    key = loc[-1]
    model = _model_at(Environment, loc[:-1])
    if model is None or not isinstance(key, str):
        return ""
    allowed = [info.alias or name for name, info in model.model_fields.items()]
    by_fold = {a.casefold(): a for a in allowed}
    guess = by_fold.get(key.casefold()) or by_fold.get(to_camel(key).casefold())
    if guess is None:
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        guess = close[0] if close else None
    return f"; did you mean {guess!r}?" if guess else f"; keys allowed here: {', '.join(allowed)}"


def _model_at(model: type[BaseModel] | None, loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that holds the keys at `loc` (walking fields by their camelCase alias)."""
    annotation: Any = model
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(part, int):
            if typing.get_origin(annotation) is not list:
                return None
            annotation = typing.get_args(annotation)[0]
            continue
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        fields = {info.alias or name: info for name, info in annotation.model_fields.items()}
        if part not in fields:
            return None
        annotation = fields[part].annotation
    annotation = _unwrap(annotation)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """`M` for `M | None`."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def yaml_hint(text: str, error: yaml.YAMLError) -> str:
    """A fix for the YAML mistakes people make most: a tab in the indentation."""
    mark = getattr(error, "problem_mark", None)
    problem = str(getattr(error, "problem", "") or "")
    line = text.splitlines()[mark.line] if mark is not None and mark.line < len(text.splitlines()) else ""
    if "\\t" in problem or "\t" in line[: len(line) - len(line.lstrip())] or "\t" in problem:
        return "; indent with spaces, not tabs (YAML does not allow tabs for indentation)"
    return ""
