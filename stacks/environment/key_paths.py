"""Every key of the environment, as the stack file spells it, and its values in one environment.

Keys are camelCase paths: `kubernetes.podCidr`, `gpuWorkers.nodes[].managementIp`. A list of
models keyed by `name` (hosts, the pools' nodes) is a key itself, `gpuWorkers.nodes`, whose value is
its names: adding or removing an item is a change of that key, and its items are matched by name,
never by position (reordering a list changes nothing; `docs/STYLE.md`: names are stable keys).
Pure: used by the day-two table (`day_two`) and its test, which walks the models so that a key
added later must declare what changing it does.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

ITEM_KEY = "name"
"""The field that identifies an item of a list of models."""


def _alternatives(annotation: Any) -> list[Any]:
    """`A | None` and `Annotated[A, ...]` down to the types they allow."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [alt for arg in typing.get_args(annotation) for alt in _alternatives(arg)]
    if origin is typing.Annotated:
        return _alternatives(typing.get_args(annotation)[0])
    return [annotation]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    models = [a for a in _alternatives(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
    return models[0] if models else None


def _list_item_model(annotation: Any) -> type[BaseModel] | None:
    for alternative in _alternatives(annotation):
        if typing.get_origin(alternative) is list:
            return _model_of(typing.get_args(alternative)[0])
    return None


def _key(model: type[BaseModel], field: str) -> str:
    return model.model_fields[field].alias or field


def model_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every leaf key of `model` and every keyed list, in declaration order."""
    keys: list[str] = []
    for field, info in model.model_fields.items():
        path = f"{prefix}{_key(model, field)}"
        if (item := _list_item_model(info.annotation)) is not None:
            keys.append(path)
            keys += model_keys(item, f"{path}[].")
        elif (nested := _model_of(info.annotation)) is not None:
            keys += model_keys(nested, f"{path}.")
        else:
            keys.append(path)
    return keys


def key_values(instance: BaseModel) -> dict[str, tuple[str, Any]]:
    """Each concrete path of `instance` (`gpuWorkers.nodes[worker-1].managementIp`) to its table
    key (`gpuWorkers.nodes[].managementIp`) and value. An unset optional model contributes nothing."""
    return dict(_values(instance, "", ""))


def _item_id(item: BaseModel, index: int) -> str:
    """An item's name; its position only for a model without one (none in the environment)."""
    return str(getattr(item, ITEM_KEY, index))


def _values(instance: BaseModel, where: str, key: str) -> Iterator[tuple[str, tuple[str, Any]]]:
    model = type(instance)
    for field, info in model.model_fields.items():
        name = _key(model, field)
        value = getattr(instance, field)
        here, table_key = f"{where}{name}", f"{key}{name}"
        if _list_item_model(info.annotation) is not None:
            items = {_item_id(item, i): item for i, item in enumerate(value or ())}
            yield here, (table_key, tuple(items))
            for item_id, item in items.items():
                yield from _values(item, f"{here}[{item_id}].", f"{table_key}[].")
        elif isinstance(value, BaseModel):
            yield from _values(value, f"{here}.", f"{table_key}.")
        elif _model_of(info.annotation) is not None:
            continue  # an unset optional model: its keys are absent, and absent differs from set
        else:
            yield here, (table_key, value)
