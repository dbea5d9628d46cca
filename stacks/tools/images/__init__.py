"""The `images` command."""

from stacks.tools.images.command import register

__all__ = ["register"]
