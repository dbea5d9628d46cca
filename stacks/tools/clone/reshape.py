"""Changing a clone's host count (pure): `--drop-host OLD` and `--add-host NEW`.

Cloning staging (8 hosts) for a site of 6 was refused: every source host had to be mapped to a
host of the new site, and two could not be (issue 54 item 3). Dropping a host drops the workers
pinned to it; adding one copies the last host's RDMA vmnics and, with `vm-host-rules` placement,
adds a worker pinned to it; new addresses take the next offsets after the highest of their kind in
the new subnets, never one the environment already uses.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network
from typing import Any

from stacks.environment.loader import ENVIRONMENT_KEY
from stacks.environment.rules import format_path


def _used(raw: Any) -> set[IPv4Address]:
    """Every IPv4 address written anywhere in the environment."""
    if isinstance(raw, dict):
        return set().union(*(_used(value) for value in raw.values())) if raw else set()
    if isinstance(raw, list):
        return set().union(*(_used(value) for value in raw)) if raw else set()
    try:
        return {IPv4Address(str(raw))}
    except ValueError:
        return set()


def _next_address(after: list[str], subnet: IPv4Network, used: set[IPv4Address]) -> IPv4Address | None:
    """The first free host address of `subnet` above the highest of `after` (or from .10)."""
    start = max((int(IPv4Address(a)) for a in after), default=int(subnet.network_address) + 9) + 1
    for value in range(start, int(subnet.broadcast_address)):
        address = IPv4Address(value)
        if address not in used and address in subnet:
            return address
    return None


def _worker_name(names: list[str]) -> str:
    """`worker-7` after `worker-6`: the last name's number plus one, unused; `worker-N` otherwise."""
    match = re.match(r"^(.*?)(\d+)$", names[-1]) if names else None
    stem, number = (match.group(1), int(match.group(2))) if match else ("worker-", len(names))
    while f"{stem}{number + 1}" in names:
        number += 1
    return f"{stem}{number + 1}"


def reshape_hosts(raw: dict[str, Any], drop: Sequence[str], add: Sequence[str]) -> tuple[list[str], list[str]]:
    """Drop and add hosts in the target's raw environment (its names and subnets already the
    target's); (problems, notes)."""
    problems: list[str] = []
    notes: list[str] = []
    hosts: list[dict[str, Any]] = raw.get("hosts", [])
    names = [h.get("name") for h in hosts]
    workers = raw.get("gpuWorkers", {})
    nodes: list[dict[str, Any]] = workers.get("nodes", [])
    for name in drop:
        if name not in names:
            problems.append(f"--drop-host {name}: not a host of the clone (its hosts: {', '.join(map(str, names))})")
    for name in add:
        if name in names:
            problems.append(f"--add-host {name}: already a host of the clone")
    if problems:
        return problems, notes
    kept = [h for h in hosts if h.get("name") not in drop]
    if not kept and not add:
        return [f"{format_path(ENVIRONMENT_KEY, ('hosts',))}: --drop-host would leave no host"], notes
    dropped_workers = [n.get("name") for n in nodes if n.get("host") in drop]
    raw["hosts"] = kept
    if drop:
        workers["nodes"] = [n for n in nodes if n.get("host") not in drop]
        notes.append(
            f"dropped host(s) {', '.join(drop)}"
            + (f" and the workers pinned there: {', '.join(map(str, dropped_workers))}" if dropped_workers else "")
        )
    rdma_subnet = IPv4Network(raw["rdmaNetwork"]["subnet"])
    mgmt_subnet = IPv4Network(raw["managementNetwork"]["subnet"])
    pinned = workers.get("placement", "vm-host-rules") == "vm-host-rules"
    template = copy.deepcopy(kept[-1] if kept else hosts[-1])
    for name in add:
        used = _used(raw)
        vmknic = _next_address([str(h["vmknicIp"]) for h in raw["hosts"]], rdma_subnet, used)
        if vmknic is None:
            problems.append(f"--add-host {name}: no free address left in rdmaNetwork.subnet {rdma_subnet}")
            continue
        host = {**copy.deepcopy(template), "name": name, "vmknicIp": str(vmknic)}
        raw["hosts"].append(host)
        if not pinned:
            continue
        nodes = workers.setdefault("nodes", [])
        used = _used(raw)
        mgmt = _next_address([str(n["managementIp"]) for n in nodes], mgmt_subnet, used)
        rdma = _next_address([str(n["rdmaIp"]) for n in nodes if n.get("rdmaIp")], rdma_subnet, used | {vmknic})
        if mgmt is None or rdma is None:
            problems.append(f"--add-host {name}: no free address left for its worker in the clone's subnets")
            continue
        worker = {"name": _worker_name([str(n["name"]) for n in nodes]), "managementIp": str(mgmt)}
        worker.update({"rdmaIp": str(rdma), "host": name})
        nodes.append(worker)
        notes.append(
            f"added host {name} (rdmaVmnics {', '.join(host.get('rdmaVmnics', []))} as {template.get('name')}, "
            f"vmknicIp {vmknic}) and worker {worker['name']} pinned to it ({mgmt}, {rdma})"
        )
    return problems, notes
