"""The `bundle` command: everything an air-gapped site needs, carried in one folder."""

from stacks.tools.bundle.command import register

__all__ = ["register"]
