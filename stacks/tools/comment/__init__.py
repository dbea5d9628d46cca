"""The `comment` command: a pull request's plan comment for one stack, rendered locally."""

from stacks.tools.comment.command import register

__all__ = ["register"]
