"""Collisions between environments: two stack files that would fight over the same vCenter objects.

Stack files are copied in the normal Pulumi habit (`cp Pulumi.dev.yaml Pulumi.qa.yaml`), and
`clone` derives one from another; either way, a new environment must not reuse another's switch,
port group and VLAN, VM name prefix, folder, API endpoint, address ranges on one vCenter, management
MACs on one network, or ESXi hosts and their RDMA uplinks. The checks are pure functions over
validated environments; `stack_files`/`load_others` read the project's other stack files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

import pydantic

from components.vsphere.first_boot import static_mac
from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, InvalidEnvironment, name_nodes, read_stack_file
from stacks.environment.model import Environment
from stacks.environment.partial import UnparsedValue
from stacks.environment.rules import Path as KeyPath
from stacks.environment.rules import format_path
from stacks.environment.stack_names import stack_files

VCENTER_SERVER_KEY = "vsphere:vsphereServer"


@dataclass(frozen=True)
class OtherStack:
    """An existing stack file the clone must not collide with."""

    file: str
    """File name, e.g. `Pulumi.dev.yaml`, for messages."""
    env: Environment
    vcenter_server: str | None


def _claimed_hosts(env: Environment) -> dict[str, int]:
    """ESXi hosts a strict (vm-host-rules) placement pins a worker to, with the worker's index."""
    if env.gpu_workers.placement != "vm-host-rules":
        return {}
    return {node.host: j for j, node in enumerate(env.gpu_workers.nodes) if node.host is not None}


def _mgmt_macs(env: Environment) -> dict[str, tuple[str, int, IPv4Address]]:
    pools = (("controlPlane", env.control_plane), ("gpuWorkers", env.gpu_workers))
    return {
        static_mac(node.management_ip, "management"): (pool_key, j, node.management_ip)
        for pool_key, pool in pools
        for j, node in enumerate(pool.nodes)
    }


def collisions(
    new_file: str, env: Environment, vcenter_server: str | None, others: Iterable[OtherStack], *, for_clone: bool = True
) -> list[str]:
    """Every way `env` would collide with another environment, each naming the other file and the key.

    For `clone` (default) each line starts with the new file's name and ends with the option that
    fixes it; for `validate` (`for_clone=False`) each line starts with the key path, as every other
    problem `validate` prints, and says what to change in the file.
    """
    lines = []
    for other in others:
        try:
            found = list(_collide(env, vcenter_server, other))
        except UnparsedValue:  # a value this depends on did not parse; that is reported already
            continue
        for path, message, option in found:
            where = format_path(ENVIRONMENT_KEY, path)
            if for_clone:
                lines.append(f"{new_file} {where}: collides with {other.file}: {message}; {option}")
            else:
                where = name_nodes(where, _node_names(env))
                lines.append(f"{where}: collides with {other.file}: {message}; give this environment its own")
    return lines


def _node_names(env: Environment) -> dict[str, dict[str, list[dict[str, str]]]]:
    """The node names `name_nodes` reads, in the stack file's shape."""
    pools = {"controlPlane": env.control_plane.nodes, "gpuWorkers": env.gpu_workers.nodes}
    return {pool: {"nodes": [{"name": node.name} for node in nodes]} for pool, nodes in pools.items()}


Clash = tuple[KeyPath, str, str]
"""Key path, what collides, and the `clone` option that fixes it."""


def _collide(env: Environment, server: str | None, other: OtherStack) -> Iterator[Clash]:
    theirs = other.env
    net, their_net = env.rdma_network, theirs.rdma_network
    same_switch = net.switch_name == their_net.switch_name
    if same_switch:
        yield ("rdmaNetwork", "switchName"), f"switch {net.switch_name!r} is already used", "pass --switch-name"
        if net.port_group_name == their_net.port_group_name:
            yield (
                ("rdmaNetwork", "portGroupName"),
                f"port group {net.port_group_name!r} on switch {net.switch_name!r} already exists",
                "pass --port-group-name",
            )
        if net.vlan_id == their_net.vlan_id:
            yield (
                ("rdmaNetwork", "vlanId"),
                f"VLAN {net.vlan_id} on switch {net.switch_name!r} is already used",
                "pass another --vlan",
            )
    if env.vm.name_prefix == theirs.vm.name_prefix:
        yield ("vm", "namePrefix"), f"VM name prefix {env.vm.name_prefix!r} is already used", "pass --name-prefix"
    if env.vcenter.folder.strip("/") == theirs.vcenter.folder.strip("/"):
        yield ("vcenter", "folder"), f"VM folder {env.vcenter.folder!r} is already used", "pass --folder"
    endpoint = env.kubernetes.control_plane_endpoint
    if endpoint is not None and endpoint == theirs.kubernetes.control_plane_endpoint:
        yield (
            ("kubernetes", "controlPlaneEndpoint"),
            f"{endpoint!r} is already another cluster's API endpoint",
            "pass --control-plane-endpoint",
        )
    # Unknown vCenter (server left to VSPHERE_SERVER) on either side: assume the same one.
    if server is None or other.vcenter_server is None or server == other.vcenter_server:
        ours = (("rdmaNetwork", "subnet"), net.subnet), (("managementNetwork", "subnet"), env.management_network.subnet)
        their_ranges = (
            ("rdmaNetwork.subnet", their_net.subnet),
            ("managementNetwork.subnet", theirs.management_network.subnet),
        )
        for path, subnet in ours:
            for their_key, their_subnet in their_ranges:
                if subnet.overlaps(their_subnet):
                    option = "--rdma-subnet" if path[0] == "rdmaNetwork" else "--mgmt-subnet"
                    yield (
                        path,
                        f"{subnet} overlaps {their_key} {their_subnet} on the same vCenter",
                        f"pass another {option}",
                    )
        if env.management_network.network_name == theirs.management_network.network_name:
            # The MACs are derived from the low 21 bits of the address, so two subnets that agree
            # in those bits (10.10.0.0/24 and 10.42.0.0/24) give two VMs on one network the same MAC.
            their_macs = _mgmt_macs(theirs)
            for mac, (pool_key, j, address) in _mgmt_macs(env).items():
                if mac in their_macs:
                    their_pool, their_j, their_address = their_macs[mac]
                    yield (
                        (pool_key, "nodes", j, "managementIp"),
                        f"{address} gets MAC {mac}, the MAC of {their_pool}.nodes[{their_j}] ({their_address}) on the "
                        f"same network {env.management_network.network_name!r}",
                        "pick a --mgmt-subnet that differs in the last 21 address bits",
                    )
    their_claims = _claimed_hosts(theirs)
    for host_name, j in _claimed_hosts(env).items():
        if host_name in their_claims:
            yield (
                ("gpuWorkers", "nodes", j, "host"),
                f"ESXi host {host_name!r} is already claimed by gpuWorkers.nodes[{their_claims[host_name]}] (strict "
                "vm-host-rules placement)",
                "map it to another host with --host-map OLD=NEW",
            )
    their_uplinks = {(h.name.casefold(), vmnic) for h in theirs.hosts for vmnic in h.rdma_vmnics}
    for i, host in enumerate(env.hosts):
        for vmnic in host.rdma_vmnics:
            if (host.name.casefold(), vmnic) in their_uplinks:
                yield (
                    ("hosts", i, "rdmaVmnics"),
                    f"{vmnic} of {host.name!r} is already the RDMA uplink of another distributed switch (a vmnic "
                    "belongs to one switch)",
                    "map the host with --host-map OLD=NEW",
                )


def cross_stack_problems(path: Path, view: ConfigView, env: Environment) -> list[str]:
    """What `validate` says about `env` (from the file at `path`) against the other stack files
    beside it: the same collisions `clone` refuses. Other files that do not parse are skipped here
    (their own `validate` reports them)."""
    here = path.resolve()
    files = {stack: p for stack, p in stack_files(path.parent).items() if p.resolve() != here}
    others, _ = load_others(files, exclude=())
    server = view.values.get(VCENTER_SERVER_KEY)
    return collisions(path.name, env, str(server) if server else None, others, for_clone=False)


def load_others(files: Mapping[str, Path], exclude: Iterable[str]) -> tuple[list[OtherStack], list[str]]:
    """The other environments, structurally validated (their cross-field rules are their own concern)."""
    others, problems = [], []
    skip = set(exclude)
    for stack, path in files.items():
        if stack in skip:
            continue
        try:
            view = read_stack_file(path)
            raw = view.values.get(ENVIRONMENT_KEY)
            env = Environment.model_validate(json.loads(raw) if isinstance(raw, str) else raw)
        except (InvalidEnvironment, pydantic.ValidationError, ValueError):
            problems.append(
                f"{path.name}: not a valid environment, so a clone cannot be checked against it; "
                f"fix it first (`python -m stacks validate {stack}`)"
            )
            continue
        server = view.values.get(VCENTER_SERVER_KEY)
        others.append(OtherStack(file=path.name, env=env, vcenter_server=str(server) if server else None))
    return others, problems
