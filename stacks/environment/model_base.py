"""The base of every stack-file model: frozen, camelCase in YAML, unknown keys rejected.

Its own module so that models kept outside `model` (which passed 400 lines) share it without an
import cycle.
"""

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
