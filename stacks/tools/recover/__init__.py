"""The `recover` command: after an interrupted `pulumi up` that skipped its checkpoints, find in
vCenter what the stack made and write a `pulumi import --file` document for it."""

from stacks.tools.recover.command import register

__all__ = ["register"]
