"""The `init` command: a stack file written from the site's vCenter."""

from stacks.tools.init.command import register

__all__ = ["register"]
