"""`kubernetes.version` from one stack file to the next: what a live cluster can be upgraded to.

The rules are `components.k8s.upgrade.versions.upgrade_refusal` (one minor at a time, no downgrade); the
cluster upgrade step applies the same ones against the live cluster's stored version. A refusal
here is not something `--accept-rebuild` can state away: kubeadm itself cannot do it.
"""

from __future__ import annotations

from pathlib import Path

from components.k8s.upgrade.versions import upgrade_refusal
from stacks.environment.loader import InvalidEnvironment, load_environment, read_stack_file
from stacks.environment.model import Environment


def version_change_problems(before: Environment, after: Environment) -> list[str]:
    """One `kubernetes.version: ...` line when the change cannot be made, else none."""
    refusal = upgrade_refusal(before.kubernetes.version, after.kubernetes.version)
    return [f"kubernetes.version: {refusal}"] if refusal else []


def checked_old_environment(against: str, new_env: Environment) -> Environment:
    """The deployed stack file's environment, once the version change to `new_env` is one kubeadm can
    make (a skipped minor or a downgrade is refused here, before anything is planned)."""
    old_env = load_environment(read_stack_file(Path(against)))
    problems = version_change_problems(old_env, new_env)
    if problems:
        raise InvalidEnvironment(problems)
    return old_env
