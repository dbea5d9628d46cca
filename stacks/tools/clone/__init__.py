"""The `clone` command."""

from stacks.tools.clone.command import register

__all__ = ["register"]
