"""Stack files with N GPU workers, derived from the reference lab (`benchmarks/reference/dev.yaml`).

Everything the dev stack says stays as it is, except what grows with the worker count: one GPU
host per worker (strict `vm-host-rules` placement), the hosts' vmknic addresses, the workers'
management and RDMA addresses, and the two subnets, widened (same network address, shorter
prefix) until the addresses fit. At N = 4 the result has dev's names and addresses.

Pure functions on plain YAML documents: no Pulumi, no validation (callers run
`stacks.environment.loader.load_environment` on the result; the tests do).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any

import yaml

from components.vsphere.template_copies.plan import clones_per_source
from stacks.environment.loader import ENVIRONMENT_KEY

BASE_STACK_FILE = Path(__file__).resolve().parent / "reference" / "dev.yaml"
"""The dev stack as the repository shipped it (the RDG's reference lab), not the user's
`Pulumi.dev.yaml`: the figures in BENCHMARKS.md are of this estate, whatever a user's dev says."""


def allocate(start: IPv4Address, count: int, taken: Iterable[IPv4Address] = ()) -> list[IPv4Address]:
    """`count` consecutive addresses from `start` on, skipping the `taken` ones."""
    skip = set(taken)
    found: list[IPv4Address] = []
    address = start
    while len(found) < count:
        if address not in skip:
            found.append(address)
        address += 1
    return found


def widen_to_fit(subnet: IPv4Network, addresses: Iterable[IPv4Address]) -> IPv4Network:
    """The smallest supernet of `subnet` in which every address is a host address."""
    wanted = list(addresses)
    net = subnet
    while not all(a in net and a not in (net.network_address, net.broadcast_address) for a in wanted):
        if net.prefixlen == 0:
            raise ValueError(f"no supernet of {subnet} holds {len(wanted)} addresses")
        net = net.supernet()
    return net


def _ip(value: Any) -> IPv4Address:
    return IPv4Address(str(value))


def scaled_environment(base: dict[str, Any], workers: int) -> dict[str, Any]:
    """The `environment` mapping of `base` (camelCase, as in the stack file) with `workers` GPU
    workers, each pinned to a GPU host of its own."""
    if workers < 1:
        raise ValueError(f"need at least one GPU worker, got {workers}")
    env = copy.deepcopy(base)
    first_host = env["hosts"][0]
    first_worker = env["gpuWorkers"]["nodes"][0]
    domain = str(first_host["name"]).partition(".")[2]
    host_names = [f"esxi-{i:02d}.{domain}" if domain else f"esxi-{i:02d}" for i in range(1, workers + 1)]

    rdma, mgmt = env["rdmaNetwork"], env["managementNetwork"]
    rdma_taken = [_ip(rdma["gateway"])] if rdma.get("gateway") else []
    vmknics = allocate(_ip(first_host["vmknicIp"]), workers, rdma_taken)
    rdma_start = max(_ip(first_worker["rdmaIp"]), vmknics[-1] + 1)
    rdma_ips = allocate(rdma_start, workers, rdma_taken)
    mgmt_taken = [_ip(mgmt["gateway"]), *(_ip(a) for a in mgmt.get("dnsServers", []))]
    mgmt_taken += [_ip(node["managementIp"]) for node in env["controlPlane"]["nodes"]]
    mgmt_ips = allocate(_ip(first_worker["managementIp"]), workers, mgmt_taken)

    rdma_subnet = widen_to_fit(IPv4Network(rdma["subnet"]), [*vmknics, *rdma_ips, *rdma_taken])
    mgmt_subnet = widen_to_fit(IPv4Network(mgmt["subnet"]), [*mgmt_ips, *mgmt_taken])
    _widen_pod_cidr(env, workers + len(env["controlPlane"]["nodes"]))
    _check_disjoint(env, workers, rdma_subnet, mgmt_subnet)

    rdma["subnet"] = str(rdma_subnet)
    mgmt["subnet"] = str(mgmt_subnet)
    env["hosts"] = [
        {"name": name, "rdmaVmnics": list(first_host["rdmaVmnics"]), "vmknicIp": str(ip)}
        for name, ip in zip(host_names, vmknics, strict=True)
    ]
    env["gpuWorkers"]["placement"] = "vm-host-rules"
    # A large estate spreads its clone sources (vcenter.templateReplicas, opt-in): the benchmarks
    # measure the stack a team would write at that size. Where one source serves every worker at
    # once `auto` derives no copy, and the stack stays the base's (4 workers: dev itself).
    if workers > clones_per_source(linked=bool(env.get("vm", {}).get("linkedClone"))):
        env["vcenter"].setdefault("templateReplicas", "auto")
    env["gpuWorkers"]["nodes"] = [
        {"name": f"worker-{i}", "managementIp": str(m), "rdmaIp": str(r), "host": host}
        for i, (m, r, host) in enumerate(zip(mgmt_ips, rdma_ips, host_names, strict=True), start=1)
    ]
    return env


def _widen_pod_cidr(env: dict[str, Any], nodes: int) -> None:
    """kube-controller-manager gives each node a /24 of the pod range (validate checks it): widen
    the range until it holds one per node."""
    kubernetes = env.setdefault("kubernetes", {})
    pods = IPv4Network(kubernetes.get("podCidr", "10.244.0.0/16"))
    while pods.prefixlen > 0 and 2 ** max(0, 24 - pods.prefixlen) < nodes:
        pods = pods.supernet()
    if str(pods) != kubernetes.get("podCidr", "10.244.0.0/16"):
        kubernetes["podCidr"] = str(pods)


def _check_disjoint(env: dict[str, Any], workers: int, rdma: IPv4Network, mgmt: IPv4Network) -> None:
    kubernetes = env.get("kubernetes", {})
    ranges = {
        "rdmaNetwork.subnet": rdma,
        "managementNetwork.subnet": mgmt,
        "kubernetes.podCidr": IPv4Network(kubernetes.get("podCidr", "10.244.0.0/16")),
        "kubernetes.serviceCidr": IPv4Network(kubernetes.get("serviceCidr", "10.96.0.0/12")),
    }
    keys = list(ranges)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            if ranges[a].overlaps(ranges[b]):
                raise ValueError(
                    f"widening for {workers} workers makes {a} {ranges[a]} overlap {b} {ranges[b]}; "
                    "start from a stack with roomier subnets"
                )


def scaled_document(base_document: dict[str, Any], workers: int) -> dict[str, Any]:
    """A whole stack document (`config:` and all) with the environment scaled to `workers`."""
    document = copy.deepcopy(base_document)
    config = document["config"]
    config[ENVIRONMENT_KEY] = scaled_environment(config[ENVIRONMENT_KEY], workers)
    return document


def emit_stack(workers: int, path: Path, base_file: Path = BASE_STACK_FILE) -> Path:
    """Write a stack file with `workers` GPU workers, derived from `base_file`."""
    base = yaml.safe_load(base_file.read_text(encoding="utf-8"))
    document = scaled_document(base, workers)
    header = (
        f"# Generated by `python -m benchmarks.scale --emit-stack {workers}` from {base_file.name}:\n"
        f"# {workers} GPU workers, one per GPU host (strict placement). Benchmark input, not a real estate.\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(document, sort_keys=False, width=120), encoding="utf-8")
    return path
