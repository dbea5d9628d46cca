"""Room for the copies of the GPU template (`vcenter.templateReplicas`) on their datastores.

A linked copy is a delta disk on the template's snapshot (counted small, like a linked clone); a
full copy takes the template's disks. This stack's copy that exists already (named
`<template>-<host>-<stack>-<hash>`: `components.vsphere.template_copies.plan.copy_prefix`) takes
nothing new. Another copy of the template on the same host (another stack's, or one made before
copies carried the stack's name) is not this stack's: it is named in a warning and counted as still
to be made. The copies on the VMs' own datastore are added to what `placement.check_datastore`
counts for the VMs (`replica_need_gb`).
"""

from __future__ import annotations

import re

from components.vcenter.inventory_model import Inventory
from components.vsphere.template_copies.plan import ReplicaSite, assign, copy_prefix, is_copy_name
from stacks.environment.model import Environment
from stacks.environment.template_sites import replica_sites
from stacks.tools.preflight.checks.report import Report

LINKED_COPY_GB = 1.0
"""A linked copy's delta disk and its snapshot's: small, like a linked clone (placement.LINKED_CLONE_GB)."""


def _base_name(env: Environment, site: ReplicaSite) -> str:
    # As `TemplateReplicas` names them before the stack and hash: `<template>-<host's short name>`.
    return f"{env.vcenter.gpu_template or env.vcenter.template}-{site.host.split('.')[0]}"


def _others(env: Environment, inv: Inventory, site: ReplicaSite, stack: str | None) -> list[str]:
    """Copies of the template on the site's host that are not this stack's: another stack's
    (`<base>-<other>-<hash>`) or made before copies carried the stack (`<base>-<hash>`)."""
    base = _base_name(env, site)
    shape = re.compile(re.escape(base) + r"-(?:.+-)?[0-9a-f]{8}")
    return sorted(name for name in inv.vms if shape.fullmatch(name) and not is_copy_name(name, base, stack))


def replica_need_gb(env: Environment, inv: Inventory, stack: str | None = None) -> dict[str, float]:
    """Datastore name -> GB the copies still to be made need there (`stack`: the stack's name, as
    `pulumi.get_stack()` gives it; None: no copy counts as made)."""
    template = env.vcenter.gpu_template or env.vcenter.template
    found = inv.vms.get(template, [])
    template_gb = sum(found[0].disk_gb) if found and found[0].disk_gb else float(env.gpu_workers.disk_gb)
    need: dict[str, float] = {}
    for site in replica_sites(env):
        if stack and any(is_copy_name(name, _base_name(env, site), stack) for name in inv.vms):
            continue
        linked = env.vm.linked_clone and site.datastore == env.vcenter.datastore
        need[site.datastore] = need.get(site.datastore, 0.0) + (LINKED_COPY_GB if linked else template_gb)
    return need


def check_replica_space(env: Environment, inv: Inventory, report: Report, stack: str | None = None) -> None:
    """Datastores other than `vcenter.datastore` (that one is judged with the VMs); and the copies
    of the template on the same hosts that belong to another stack."""
    key = ("vcenter", "templateReplicas")
    for site in replica_sites(env):
        others = _others(env, inv, site, stack)
        if others:
            mine = f"{copy_prefix(_base_name(env, site), stack)}<hash>" if stack else "a copy of its own"
            report.warn(
                key,
                f"{len(others)} copy(ies) of the template on host {site.host} belong to another stack, or were "
                f"made before copies carried the stack's name ({', '.join(others[:5])}): this stack makes its own, "
                f"{mine}, beside them, and never `pulumi import` one (two stacks would own one VM, and the first "
                "to replace it deletes the other's clone source)",
            )
    for datastore, need_gb in sorted(replica_need_gb(env, inv, stack).items()):
        if datastore == env.vcenter.datastore:
            continue
        store = inv.datastores.get(datastore)
        if store is None or not store.accessible:
            report.blocker(key, f"datastore {datastore!r} of a template copy not found or not accessible")
            continue
        free_gb = store.free_bytes / 2**30
        detail = f"{need_gb:.0f} GB needed for the template copies, {free_gb:.0f} GB free on {datastore!r}"
        if need_gb > free_gb:
            report.blocker(key, detail)
        else:
            report.ok(key, detail)


def check_replica_state(env: Environment, inv: Inventory, report: Report, stack: str | None) -> None:
    """This stack's copies as vCenter has them now (issue 32 item 8): one deleted by hand while
    workers that cloned it are still there, or one without its snapshot or template mark. Pulumi
    sees either only at its next diff of the copy (components/vsphere/template_copies/replica.py,
    `drift`); saying it here comes before any `pulumi up`."""
    if not stack:
        return
    key = ("vcenter", "templateReplicas")
    sites = replica_sites(env)
    nodes = {env.vm_name(node): node.host for node in env.gpu_workers.nodes}
    served = assign(
        nodes,
        datastore=env.vcenter.datastore,
        linked=env.vm.linked_clone,
        sites=sites,
        host_order=[host.name for host in env.hosts],
    )
    for site in sites:
        base = _base_name(env, site)
        mine = [vm for name, vms in inv.vms.items() if is_copy_name(name, base, stack) for vm in vms]
        legacy = [name for name in inv.vms if is_copy_name(name, base, None)]
        workers = sorted(name for name, served_by in served.items() if served_by == site and name in inv.vms)
        if not mine and not legacy and workers:
            report.warn(
                key,
                f"this stack's copy of the template on host {site.host} ({copy_prefix(base, stack)}<hash>) not found, "
                f"but workers that clone it exist ({', '.join(workers[:5])}): it was deleted in vCenter? `pulumi up` "
                "makes a new one and the workers roll to it (their clone source changes)",
            )
        for copy in mine:
            lost = (
                "has no snapshot" if not copy.snapshots else "is no longer a template" if not copy.is_template else None
            )
            if lost:
                report.warn(
                    key,
                    f"template copy {copy.name!r} {lost} (changed in vCenter): linked clones of it fail "
                    "until `pulumi up` takes its snapshot again and marks it a template, in place",
                )
