"""The `plan` command: the program under the mock runtime, and what it would register."""

from stacks.tools.plan.cli import register

__all__ = ["register"]
