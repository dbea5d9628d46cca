"""Backstops: the components' own pure checks, run on the environment by `validate`.

Every check a component makes on configuration is also a rule with a precise key path (the other
rule modules). These backstops call the components' public check functions on the values the
wiring would pass them, so a check a component gains later is refused by `validate` too, before any
resource is registered, even before someone writes its rule. Backstops run only when no rule found a
problem (`registry.check`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.k8s import node_bootstrap as cloud_init
from components.k8s.node_bootstrap.checks import validate_spec
from stacks.environment.cluster_spec import cluster_spec
from stacks.environment.model import Environment
from stacks.environment.registry import Path, Problem, backstop

# The bootstrap's field names (`validate_spec` messages start with them) -> the stack keys they come from
# (stacks/wiring/kubernetes.py `bootstrap_args`).
_SPEC_FIELDS: list[tuple[re.Pattern[str], Path]] = [
    (re.compile(r"^cluster_name\b"), ("vm", "namePrefix")),
    (re.compile(r"^kubernetes_version\b"), ("kubernetes", "version")),
    (re.compile(r"^pod_cidr\b"), ("kubernetes", "podCidr")),
    (re.compile(r"^service_cidr\b"), ("kubernetes", "serviceCidr")),
    (re.compile(r"^control_plane_endpoint\b"), ("kubernetes", "controlPlaneEndpoint")),
    (re.compile(r"^control_plane_nodes\b"), ("controlPlane", "nodes")),
    (re.compile(r"^worker_nodes\b"), ("gpuWorkers", "nodes")),
    (re.compile(r"^search_domain\b"), ("managementNetwork", "dnsDomain")),
    (re.compile(r"^ssh_authorized_keys\[(\d+)\]"), ("kubernetes", "sshAuthorizedKeys")),
    (re.compile(r"^calico\b"), ("kubernetes", "cni")),
]


class _UncheckedSpec(cloud_init.ClusterSpec):
    """The bootstrap's spec without its refusal on construction, so `validate_spec` can list
    every problem instead of raising on the first spec."""

    def validation_errors(self) -> list[str]:
        return []


def bootstrap_spec(env: Environment) -> cloud_init.ClusterSpec:
    """The spec `ClusterBootstrap` gets (the same derivation stacks/wiring uses), unchecked."""
    return cluster_spec(env, _UncheckedSpec)


def _stack_path(message: str) -> Path:
    for pattern, path in _SPEC_FIELDS:
        match = pattern.match(message)
        if match:
            return (*path, int(match.group(1))) if match.groups() else path
    return ("kubernetes",)


@backstop
def node_bootstrap_accepts_the_cluster(env: Environment) -> Iterator[Problem]:
    if env.kubernetes.mode != "bootstrap":
        return
    for message in validate_spec(bootstrap_spec(env)):
        yield Problem(_stack_path(message), f"the node bootstrap refuses this: {message}")
