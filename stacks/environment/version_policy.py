"""What the version policy (`components.k8s.version_policy`) says of a stack: warnings for
`validate`, a short summary for `plan`.

A minor outside the policy never gets here: the field check refuses it, naming the newest
(`stacks.environment.fields`). A minor past its end of life is valid (a cluster must be able to
upgrade out of it one minor at a time) and warned of. So is a minor no pinned Calico is tested on
(1.37): the stack may run it, and the warning names what is missing.
"""

from __future__ import annotations

from datetime import date

from components.k8s.version_policy import end_of_life_warning, policy_for, summary
from stacks.environment.model import Environment
from stacks.environment.rules.tuning import untested_kubeflow_releases


def version_warnings(env: Environment, on: date | None = None) -> list[str]:
    """`kubernetes.version: ...` lines: past its end of life; no pinned Calico tested on it; and
    `tuning.*.version` lines: a Kubeflow release built for the minor but not tested on it."""
    version = env.kubernetes.version
    found = []
    eol = end_of_life_warning(version, on)
    if eol is not None:
        found.append(f"kubernetes.version {version}: {eol}")
    policy = policy_for(version)
    if env.kubernetes.mode == "bootstrap" and policy.calico is None:
        found.append(
            f"kubernetes.version {version}: no Calico release this program pins is tested by Tigera on "
            f"{policy.line} (v3.32 is tested on 1.34-1.36; v3.33 on 1.35-1.37, and its manifest is not pinned in "
            f"manifests/index.json yet); kubernetes.cni.version {env.kubernetes.cni.version} runs untested there. "
            "Add v3.33's entry (url, sha256, operator_image) and set kubernetes.cni.version to it, or stay on 1.36"
        )
    found += untested_kubeflow_releases(env)
    return found


def policy_lines(env: Environment, on: date | None = None) -> list[str]:
    """The policy of the stack's minor, for `plan`."""
    return summary(env.kubernetes.version, on)
