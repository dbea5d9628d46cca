"""Edits a user makes to their `Pulumi.dev.yaml` when adopting the project.

The README says "`Pulumi.dev.yaml` edited to your estate" and docs/environments.md describes a
scale out ("add the host under `hosts` and the node under `gpuWorkers.nodes`"). These functions
make exactly those edits to whatever dev the repository holds (the shipped one, or one a user
already edited), so a test can prove that the project's own tests do not depend on what the
user's stack files say (tests/test_user_stacks.py). They edit the parsed document: comments are
not the point here, and a user's own layout of the lists (flow or block style) must not matter.
"""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Any

import yaml

ENVIRONMENT_KEY = "vsphere-gpu-cluster:environment"
USER_DOMAIN = "estate.example.net"


def rename_hosts(env: dict[str, Any]) -> dict[str, str]:
    """Every ESXi host gets a name of the user's estate, under `hosts` and in each worker's `host`."""
    names = {host["name"]: f"user-gpu{i:02d}.{USER_DOMAIN}" for i, host in enumerate(env["hosts"], start=1)}
    for host in env["hosts"]:
        host["name"] = names[host["name"]]
    for node in env["gpuWorkers"]["nodes"]:
        if node.get("host") in names:
            node["host"] = names[node["host"]]
    return names


def _next(addresses: list[str], n: int) -> str:
    return str(max(IPv4Address(a) for a in addresses) + n)


def scale_out(env: dict[str, Any], count: int) -> None:
    """`count` more ESXi hosts and a GPU worker on each, at the next free addresses, as
    docs/environments.md's scale out describes."""
    hosts, workers = env["hosts"], env["gpuWorkers"]["nodes"]
    nodes = [*env["controlPlane"]["nodes"], *workers]
    managements = [str(n["managementIp"]) for n in nodes]
    rdmas = [str(h["vmknicIp"]) for h in hosts] + [str(n["rdmaIp"]) for n in workers if n.get("rdmaIp")]
    taken = {str(n["name"]) for n in nodes}
    numbers = [k for k in range(1, len(taken) + count + 2) if f"scale-out-{k}" not in taken][:count]
    for n, number in enumerate(numbers, start=1):
        name = f"scale-out-{number:02d}.{USER_DOMAIN}"
        hosts.append({**hosts[-1], "name": name, "vmknicIp": _next(rdmas, n)})
        workers.append(
            {
                **workers[-1],
                "name": f"scale-out-{number}",
                "managementIp": _next(managements, n),
                "rdmaIp": _next(rdmas, count + n),
                "host": name,
            }
        )


def as_a_user_edits_dev(text: str) -> str:
    """The user's dev: their own host names, and a scale out by two hosts and two workers."""
    document = yaml.safe_load(text)
    env = document["config"][ENVIRONMENT_KEY]
    rename_hosts(env)
    scale_out(env, 2)
    return yaml.safe_dump(document, sort_keys=False)
