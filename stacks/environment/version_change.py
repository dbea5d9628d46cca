"""`kubernetes.version` from one stack file to the next: what a live cluster can be upgraded to.

The rules are `components.k8s.versions.upgrade_refusal` (one minor at a time, no downgrade); the
cluster upgrade step applies the same ones against the live cluster's stored version. A refusal
here is not something `--accept-rebuild` can state away: kubeadm itself cannot do it.
"""

from __future__ import annotations

from components.k8s.versions import upgrade_refusal
from stacks.environment.model import Environment


def version_change_problems(before: Environment, after: Environment) -> list[str]:
    """One `kubernetes.version: ...` line when the change cannot be made, else none."""
    refusal = upgrade_refusal(before.kubernetes.version, after.kubernetes.version)
    return [f"kubernetes.version: {refusal}"] if refusal else []
