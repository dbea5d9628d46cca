"""Build as much of an environment as parsed, so the rules can run beside the field errors.

pydantic refuses a whole model when one field fails. To report every problem in one pass, the
loader rebuilds the environment field by field: what validated keeps its value, and every field
that failed (or is missing) becomes an `Unparsed` placeholder. Any use of a placeholder (reading an
attribute, comparing, iterating, formatting) raises `UnparsedValue`, which the rule runner takes as
"this rule depends on a value the user must fix first" and skips the rule. No rule ever sees a
made-up value, so no rule reports a problem that is only a consequence of another.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any

import pydantic
from pydantic import BaseModel


class UnparsedValue(Exception):
    """A rule touched a value that failed its own check (already reported)."""


class Unparsed:
    """Stands for a value that did not validate; every use raises `UnparsedValue`."""

    __slots__ = ("where",)

    def __init__(self, where: tuple[str | int, ...]) -> None:
        object.__setattr__(self, "where", where)

    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise UnparsedValue(self.where)

    def __getattr__(self, name: str) -> Any:
        raise UnparsedValue(self.where)

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __hash__ = __bool__ = __len__ = __iter__ = __contains__ = __getitem__ = _refuse
    __str__ = __int__ = __float__ = __index__ = __format__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __mod__ = _refuse

    def __repr__(self) -> str:
        return f"<unparsed {self.where}>"


def has_unparsed(value: Any) -> bool:
    """Whether anything inside `value` (a model, list or scalar) did not parse."""
    if isinstance(value, Unparsed):
        return True
    if isinstance(value, BaseModel):
        return any(has_unparsed(getattr(value, name)) for name in type(value).model_fields)
    if isinstance(value, list):
        return any(has_unparsed(item) for item in value)
    return False


def salvage(model: type[BaseModel], raw: Any, where: tuple[str | int, ...] = ()) -> Any:
    """`model` validated from `raw`, with `Unparsed` wherever a value failed; never raises."""
    try:
        return model.model_validate(raw)
    except pydantic.ValidationError as error:
        if not isinstance(raw, dict):
            return Unparsed(where)
        errors = [item["loc"] for item in error.errors() if item["loc"] and item["type"] != "extra_forbidden"]
    failed = {loc[0] for loc in errors}
    # A field refused as a whole (a list too short, a wrong type) cannot be looked into.
    whole = {loc[0] for loc in errors if len(loc) == 1}
    values: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key not in raw:
            values[name] = Unparsed((*where, key)) if info.is_required() else info.get_default(call_default_factory=True)
            continue
        value = raw[key]
        if key not in failed:
            try:
                values[name] = _validated(model, name, value)
            except pydantic.ValidationError:  # valid only beside its siblings: treat as not parsed
                values[name] = Unparsed((*where, key))
            continue
        if key in whole:
            values[name] = Unparsed((*where, key))
            continue
        values[name] = _salvage_value(info.annotation, value, (*where, key))
    return model.model_construct(_fields_set={n for n, i in model.model_fields.items() if (i.alias or n) in raw}, **values)


def _validated(model: type[BaseModel], name: str, value: Any) -> Any:
    """The field's value as pydantic makes it, validated alone (it passed inside the model)."""
    return _adapter(model, name).validate_python(value)


@functools.cache
def _adapter(model: type[BaseModel], name: str) -> pydantic.TypeAdapter[Any]:
    info = model.model_fields[name]
    annotation = typing.Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
    return pydantic.TypeAdapter(annotation)


def _salvage_value(annotation: Any, value: Any, where: tuple[str | int, ...]) -> Any:
    """Recurse into nested models and lists of them; anything else that failed is `Unparsed`."""
    model = _model_in(annotation)
    if model is not None and isinstance(value, dict):
        return salvage(model, value, where)
    item_model = _list_item_model(annotation)
    if item_model is not None and isinstance(value, list):
        return [salvage(item_model, item, (*where, i)) for i, item in enumerate(value)]
    return Unparsed(where)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """`M` for `M` or `M | None`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if len(models) == 1 else None
    return None


def _list_item_model(annotation: Any) -> type[BaseModel] | None:
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        return _model_in(item)
    return None
