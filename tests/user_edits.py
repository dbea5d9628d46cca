"""Edits a user makes to the shipped `Pulumi.dev.yaml` when adopting the project, as text.

The README says "`Pulumi.dev.yaml` edited to your estate" and docs/environments.md describes a
scale out ("add the host under `hosts` and the node under `gpuWorkers.nodes`"). These functions
make exactly those edits to a stack file's text, comments kept, so a test can prove that the
project's own tests do not depend on what the user's stack files say (tests/test_user_stacks.py).
"""

from __future__ import annotations

import re

USER_HOSTS = {f"esxi-0{i}.lab.example.com": f"gpu{i:02d}.estate.example.net" for i in range(1, 5)}
"""The lab's host names replaced by the user's own (a hosts change)."""


def _replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) < 1:
        raise ValueError(f"the stack file no longer contains {old!r}: update tests/user_edits.py")
    return text.replace(old, new)


def rename_hosts(text: str, names: dict[str, str]) -> str:
    """Every ESXi host renamed, under `hosts` and in each worker's `host:`."""
    for old, new in names.items():
        text = _replace_once(text, old, new)
    return text


def scale_out(text: str, count: int) -> str:
    """`count` more ESXi hosts and a GPU worker on each, after the last of each list.

    The new entries copy the style and the address pattern of the last ones (the next vmknic
    address, the next management and RDMA addresses), the way a user extends the lists by hand.
    """
    host_lines = re.findall(r"^( +- \{name: ([^,]+), rdmaVmnics: \[([^\]]+)\], vmknicIp: ([\d.]+)\})$", text, re.M)
    worker_lines = re.findall(
        r"^( +- \{name: ([\w-]+), managementIp: ([\d.]+), rdmaIp: ([\d.]+), host: ([^}]+)\})$", text, re.M
    )
    if not host_lines or not worker_lines:
        raise ValueError("no one-line hosts/gpuWorkers.nodes entries found: update tests/user_edits.py")
    last_host, host_name, vmnics, vmknic = host_lines[-1]
    last_worker, worker_name, mgmt, rdma, _ = worker_lines[-1]
    indent_host = last_host[: last_host.index("-")]
    indent_worker = last_worker[: last_worker.index("-")]
    domain = host_name.split(".", 1)[1]
    new_hosts, new_workers = [last_host], [last_worker]
    for n in range(1, count + 1):
        name = f"scale-out-{n:02d}.{domain}"
        new_hosts.append(f"{indent_host}- {{name: {name}, rdmaVmnics: [{vmnics}], vmknicIp: {_plus(vmknic, n)}}}")
        number = int(re.sub(r"\D", "", worker_name) or 0) + n
        new_workers.append(
            f"{indent_worker}- {{name: worker-{number}, managementIp: {_plus(mgmt, n)}, "
            f"rdmaIp: {_plus(rdma, n)}, host: {name}}}"
        )
    text = text.replace(last_host + "\n", "\n".join(new_hosts) + "\n", 1)
    return text.replace(last_worker + "\n", "\n".join(new_workers) + "\n", 1)


def _plus(address: str, n: int) -> str:
    head, last = address.rsplit(".", 1)
    return f"{head}.{int(last) + n}"


def as_a_user_edits_dev(text: str) -> str:
    """The user's dev: their own host names, and a scale out by two hosts and two workers."""
    return scale_out(rename_hosts(text, USER_HOSTS), 2)
