"""The `schema` command."""

from stacks.tools.schema.command import register

__all__ = ["register"]
