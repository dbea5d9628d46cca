"""Room for the copies of the GPU template (`vcenter.templateReplicas`) on their datastores.

A linked copy is a delta disk on the template's snapshot (counted small, like a linked clone); a
full copy takes the template's disks. A copy that exists already (its name starts with the copy's
base name: `components.vsphere.template_copies.replicas`) takes nothing new. The copies on the VMs' own
datastore are added to what `placement.check_datastore` counts for the VMs (`replica_need_gb`).
"""

from __future__ import annotations

from components.vcenter.inventory_model import Inventory
from components.vsphere.template_copies.plan import ReplicaSite
from stacks.environment.model import Environment
from stacks.environment.template_sites import replica_sites
from stacks.tools.preflight.checks.report import Report

LINKED_COPY_GB = 1.0
"""A linked copy's delta disk and its snapshot's: small, like a linked clone (placement.LINKED_CLONE_GB)."""


def _base_name(env: Environment, site: ReplicaSite) -> str:
    # As `TemplateReplicas` names them: `<template>-<host's short name>-<hash>`.
    return f"{env.vcenter.gpu_template or env.vcenter.template}-{site.host.split('.')[0]}-"


def replica_need_gb(env: Environment, inv: Inventory) -> dict[str, float]:
    """Datastore name -> GB the copies still to be made need there."""
    template = env.vcenter.gpu_template or env.vcenter.template
    found = inv.vms.get(template, [])
    template_gb = sum(found[0].disk_gb) if found and found[0].disk_gb else float(env.gpu_workers.disk_gb)
    need: dict[str, float] = {}
    for site in replica_sites(env):
        if any(name.startswith(_base_name(env, site)) for name in inv.vms):
            continue
        linked = env.vm.linked_clone and site.datastore == env.vcenter.datastore
        need[site.datastore] = need.get(site.datastore, 0.0) + (LINKED_COPY_GB if linked else template_gb)
    return need


def check_replica_space(env: Environment, inv: Inventory, report: Report) -> None:
    """Datastores other than `vcenter.datastore` (that one is judged with the VMs)."""
    key = ("vcenter", "templateReplicas")
    for datastore, need_gb in sorted(replica_need_gb(env, inv).items()):
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
