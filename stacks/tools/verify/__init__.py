"""The `verify` command.

`register` imports the command module when the CLI asks for it, not when this package is imported:
the availability check (`stacks.tools.availability`), which the command dispatches to, builds on
this package's pieces (`gpu`, `gpu_nodes`, `logs`), and importing the command here made importing
any of them first an import circle (tests/k8s_jobs/test_availability.py failed when run alone).
"""

from __future__ import annotations

from typing import Any


def register(commands: Any) -> None:
    from stacks.tools.verify.command import register as register_command

    register_command(commands)


__all__ = ["register"]
