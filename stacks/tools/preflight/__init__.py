"""The `preflight` command."""

from stacks.tools.preflight.command import register

__all__ = ["register"]
