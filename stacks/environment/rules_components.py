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

from components.k8s import cloud_init
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
    """The spec `ClusterBootstrap` gets, built from plain values as stacks/wiring does."""
    k8s = env.kubernetes
    endpoint = k8s.control_plane_endpoint or str(env.control_plane.nodes[0].management_ip)
    return _UncheckedSpec(
        cluster_name=f"{env.vm.name_prefix}-k8s",
        kubernetes_version=k8s.version,
        pod_cidr=str(k8s.pod_cidr),
        service_cidr=str(k8s.service_cidr),
        control_plane_endpoint=endpoint,
        control_plane_nodes=[
            cloud_init.ClusterNode(name=n.name, management_ip=str(n.management_ip)) for n in env.control_plane.nodes
        ],
        worker_nodes=[
            cloud_init.ClusterNode(
                name=n.name, management_ip=str(n.management_ip), rdma_ip=str(n.rdma_ip) if n.rdma_ip else None, gpu=True
            )
            for n in env.gpu_workers.nodes
        ],
        search_domain=env.management_network.dns_domain,
        ssh_authorized_keys=list(k8s.ssh_authorized_keys),
        calico=cloud_init.CalicoSettings(version=k8s.cni.version),
        taint_gpu_nodes=k8s.gpu_node_taint,
    )


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
    for message in cloud_init.validate_spec(bootstrap_spec(env)):
        yield Problem(_stack_path(message), f"the node bootstrap refuses this: {message}")
