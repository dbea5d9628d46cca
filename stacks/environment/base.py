"""The base of every configuration model (its own module so that the subject modules, e.g.
`stacks.environment.monitoring`, and `stacks.environment.model` share it without an import cycle)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    """Frozen, camelCase in YAML, unknown keys rejected."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        # camelCase only: the same spelling the JSON Schema (and so editors) accept.
        alias_generator=to_camel,
        use_attribute_docstrings=True,
    )
