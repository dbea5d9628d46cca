"""The `verify` command."""

from stacks.tools.verify.command import register

__all__ = ["register"]
