"""The `validate` command."""

from stacks.tools.validate.command import register

__all__ = ["register"]
