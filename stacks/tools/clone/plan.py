"""The pure half of `python -m stacks clone`: a new environment's config from an existing one.

What is re-derived and why is described in `stacks.tools.clone.command`, which does the reading, checking
against the other stack files, and writing. Nothing here reads or writes a file.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from typing import Any

from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView
from stacks.environment.model import Environment
from stacks.environment.rules import Path as KeyPath
from stacks.environment.rules import format_path
from stacks.tools.clone.reshape import reshape_hosts


class CloneRefused(Exception):
    """Raised with every reason the clone cannot be made."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True, kw_only=True)
class CloneOptions:
    source: str
    """The source stack's name (`Pulumi.<source>.yaml`)."""
    target: str
    """The new stack's name; also the new environment's `name`."""
    vlan_id: int
    rdma_subnet: IPv4Network
    mgmt_subnet: IPv4Network
    host_map: Mapping[str, str] = field(default_factory=dict)
    """Source ESXi host name -> the new environment's host; hosts not named keep their name."""
    name_prefix: str | None = None
    folder: str | None = None
    resource_pool: str | None = None
    switch_name: str | None = None
    port_group_name: str | None = None
    control_plane_endpoint: str | None = None
    pod_cidr: IPv4Network | None = None
    service_cidr: IPv4Network | None = None
    drop_hosts: tuple[str, ...] = ()
    """Hosts (the source's names, or their --host-map names) the clone leaves out, with their workers."""
    add_hosts: tuple[str, ...] = ()
    """Hosts the clone adds, each like the last host, with a worker pinned to it (stacks.tools.clone.reshape)."""


@dataclass(frozen=True)
class ClonePlan:
    """The new stack's `config:` mapping and what the user still has to do."""

    config: dict[str, Any]
    secrets_to_set: list[str]
    """Secret keys of the source that the new stack needs set again (sorted)."""
    notes: list[str]


# ---------------------------------------------------------------------------------------------
# Pure re-derivation


def replace_word(value: str, old: str, new: str) -> str | None:
    """`value` with every whole-word `old` (not inside a longer name) replaced; None if absent."""
    pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(old)}(?![A-Za-z0-9])")
    if not pattern.search(value):
        return None
    return pattern.sub(lambda _match: new, value)


def derive_name(value: str, source: str, target: str, *, joiner: str = "-") -> str:
    """`dev-rdma-dvs` -> `lab-rdma-dvs`; a name without the source's name gets the target's in front."""
    replaced = replace_word(value, source, target)
    return replaced if replaced is not None else f"{target}{joiner}{value}"


def derive_folder(folder: str, source: str, target: str) -> str:
    """Replace the source's name in the folder path (`gpu-cluster/dev`), else add a segment for it."""
    segments = folder.strip("/").split("/")
    renamed = [replace_word(segment, source, target) for segment in segments]
    if any(segment is not None for segment in renamed):
        return "/".join(new if new is not None else old for old, new in zip(segments, renamed, strict=True))
    return "/".join([*segments, target])


def move_address(address: IPv4Address, old: IPv4Network, new: IPv4Network) -> IPv4Address:
    """The address with the same host offset in `new`; ValueError when the offset does not fit."""
    offset = int(address) - int(old.network_address)
    if not 0 <= offset < old.num_addresses:
        raise ValueError(f"{address} is not inside {old}")
    usable = range(1, new.num_addresses - 1) if new.prefixlen < 31 else range(new.num_addresses)
    if offset not in usable:
        raise ValueError(
            f"{address} is host {offset} of {old}, and {new} has host offsets "
            f"{usable.start}-{usable.stop - 1} only: pick a larger subnet or renumber this address first"
        )
    return IPv4Address(int(new.network_address) + offset)


class _Rewriter:
    """Applies changes to a copy of the raw (camelCase) environment, collecting problems."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw: dict[str, Any] = copy.deepcopy(dict(raw))
        self.problems: list[str] = []
        self.notes: list[str] = []

    def _parent(self, path: KeyPath) -> Any:
        current: Any = self.raw
        for part in path[:-1]:
            current = current[part] if isinstance(part, int) else current.setdefault(part, {})
        return current

    def set(self, path: KeyPath, value: Any) -> None:
        self._parent(path)[path[-1]] = value

    def drop(self, path: KeyPath) -> None:
        parent = self._parent(path)
        if isinstance(parent, dict):
            parent.pop(path[-1], None)

    def problem(self, path: KeyPath, message: str) -> None:
        self.problems.append(f"{format_path(ENVIRONMENT_KEY, path)}: {message}")

    def move(self, path: KeyPath, address: IPv4Address, old: IPv4Network, new: IPv4Network, option: str) -> None:
        try:
            self.set(path, str(move_address(address, old, new)))
        except ValueError as error:
            self.problem(path, f"cannot move to {option} {new}: {error}")


def plan_environment(
    source: Environment, raw: Mapping[str, Any], options: CloneOptions
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The target's raw environment (the source's, with unique parts re-derived), problems, notes.

    Works on the raw mapping so the new file keeps the source's keys and order and does not
    spell out every default; `source` is the validated view of the same mapping.
    """
    src, dst = options.source, options.target
    out = _Rewriter(raw)
    out.set(("name",), dst)

    vc = source.vcenter
    out.set(("vcenter", "folder"), options.folder or derive_folder(vc.folder, src, dst))
    if vc.resource_pool is not None or options.resource_pool is not None:
        resource_pool = options.resource_pool or derive_name(vc.resource_pool or "", src, dst)
        out.set(("vcenter", "resourcePool"), resource_pool)
        out.notes.append(
            f"vcenter.resourcePool {resource_pool!r} must exist in vCenter before `pulumi up` (the program looks it up, "
            "it does not create it); pass --resource-pool to pick another"
        )
    out.set(("vm", "namePrefix"), options.name_prefix or derive_name(source.vm.name_prefix, src, dst))

    net = source.rdma_network
    out.set(("rdmaNetwork", "switchName"), options.switch_name or derive_name(net.switch_name, src, dst))
    out.set(("rdmaNetwork", "portGroupName"), options.port_group_name or derive_name(net.port_group_name, src, dst))
    out.set(("rdmaNetwork", "vlanId"), options.vlan_id)
    rdma_old, rdma_new = net.subnet, options.rdma_subnet
    out.set(("rdmaNetwork", "subnet"), str(rdma_new))
    if net.gateway is not None:
        out.move(("rdmaNetwork", "gateway"), net.gateway, rdma_old, rdma_new, "--rdma-subnet")

    mgmt = source.management_network
    mgmt_old, mgmt_new = mgmt.subnet, options.mgmt_subnet
    out.set(("managementNetwork", "subnet"), str(mgmt_new))
    out.move(("managementNetwork", "gateway"), mgmt.gateway, mgmt_old, mgmt_new, "--mgmt-subnet")
    for i, dns in enumerate(mgmt.dns_servers):
        if dns in mgmt_old:
            out.move(("managementNetwork", "dnsServers", i), dns, mgmt_old, mgmt_new, "--mgmt-subnet")
        else:  # a resolver elsewhere (shared by environments) stays; whether the new subnet reaches it is for a person
            out.notes.append(
                f"managementNetwork.dnsServers[{i}] {dns} kept: it is outside {src}'s management subnet {mgmt_old} "
                f"(a shared resolver?); check that {mgmt_new} can reach it"
            )

    _rename_hosts(out, source, options)
    for i, host in enumerate(source.hosts):
        out.move(("hosts", i, "vmknicIp"), host.vmknic_ip, rdma_old, rdma_new, "--rdma-subnet")
    for pool_key, pool in (("controlPlane", source.control_plane), ("gpuWorkers", source.gpu_workers)):
        for j, node in enumerate(pool.nodes):
            out.move((pool_key, "nodes", j, "managementIp"), node.management_ip, mgmt_old, mgmt_new, "--mgmt-subnet")
            if node.rdma_ip is not None:
                out.move((pool_key, "nodes", j, "rdmaIp"), node.rdma_ip, rdma_old, rdma_new, "--rdma-subnet")

    _control_plane_endpoint(out, source, options)
    if options.pod_cidr is not None:
        out.set(("kubernetes", "podCidr"), str(options.pod_cidr))
    if options.service_cidr is not None:
        out.set(("kubernetes", "serviceCidr"), str(options.service_cidr))
    if options.drop_hosts or options.add_hosts:
        drop = [options.host_map.get(name, name) for name in options.drop_hosts]
        problems, notes = reshape_hosts(out.raw, drop, options.add_hosts)
        out.problems += problems
        out.notes += notes
    return out.raw, out.problems, out.notes


def _rename_hosts(out: _Rewriter, source: Environment, options: CloneOptions) -> None:
    known = [host.name for host in source.hosts]
    for old in options.host_map:
        if old not in known:
            out.problems.append(
                f"--host-map {old}: not a host of Pulumi.{options.source}.yaml (its hosts: {', '.join(known)})"
            )
    for i, host in enumerate(source.hosts):
        if host.name in options.host_map:
            out.set(("hosts", i, "name"), options.host_map[host.name])
    for j, node in enumerate(source.gpu_workers.nodes):
        if node.host is not None and node.host in options.host_map:
            out.set(("gpuWorkers", "nodes", j, "host"), options.host_map[node.host])


def _control_plane_endpoint(out: _Rewriter, source: Environment, options: CloneOptions) -> None:
    path: KeyPath = ("kubernetes", "controlPlaneEndpoint")
    if options.control_plane_endpoint is not None:
        out.set(path, options.control_plane_endpoint)
        return
    endpoint = source.kubernetes.control_plane_endpoint
    if endpoint is None:
        return
    if len(source.control_plane.nodes) == 1:
        out.drop(path)
        out.notes.append(
            f"kubernetes.controlPlaneEndpoint {endpoint!r} dropped: with one control-plane node the API is "
            "reached at that node's address; pass --control-plane-endpoint to set one"
        )
        return
    try:
        address: IPv4Address | None = IPv4Address(endpoint)
    except ValueError:
        address = None
    if address is not None:
        if address in source.management_network.subnet:
            out.move(path, address, source.management_network.subnet, options.mgmt_subnet, "--mgmt-subnet")
        else:
            out.problem(
                path,
                f"{endpoint} is outside managementNetwork.subnet, so it cannot be moved: pass --control-plane-endpoint",
            )
        return
    renamed = replace_word(endpoint, options.source, options.target)
    if renamed is None:
        out.problem(
            path,
            f"{endpoint!r} does not contain {options.source!r} to replace, and the new cluster must not use "
            f"{options.source}'s API endpoint: pass --control-plane-endpoint (a load-balanced DNS name or VIP)",
        )
        return
    out.set(path, renamed)
    out.notes.append(
        f"kubernetes.controlPlaneEndpoint {renamed!r}: create its DNS record and load balancer before `pulumi up`"
    )


def plan_clone(view: ConfigView, source: Environment, options: CloneOptions) -> ClonePlan:
    """The new stack's config: the source's, secrets dropped, the environment re-derived."""
    raw = view.values.get(ENVIRONMENT_KEY)
    if not isinstance(raw, Mapping):
        raise CloneRefused([f"{ENVIRONMENT_KEY}: the source must hold the environment as a YAML mapping"])
    new_env, problems, notes = plan_environment(source, raw, options)
    if problems:
        raise CloneRefused(problems)
    config = {key: (new_env if key == ENVIRONMENT_KEY else copy.deepcopy(value)) for key, value in view.values.items()}
    return ClonePlan(config=config, secrets_to_set=sorted(view.secret_keys), notes=notes)
