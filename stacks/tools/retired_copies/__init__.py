"""The `retired-copies` command."""

from stacks.tools.retired_copies.command import register

__all__ = ["register"]
