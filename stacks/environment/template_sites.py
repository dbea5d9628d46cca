"""The copies of the GPU template this environment keeps: one derivation for the wiring (what is
built) and preflight (what is checked), so the two cannot drift. Pure: no Pulumi, no vCenter."""

from __future__ import annotations

from components.vsphere.template_copies.plan import ReplicaSite, derived_sites
from stacks.environment.model import Environment


def replica_sites(env: Environment) -> list[ReplicaSite]:
    """The copies of the GPU workers' template this stack keeps: the configured ones, the derived
    layout (`auto`), or none (`VcenterInventory.template_replicas`)."""
    vc = env.vcenter
    if vc.template_replicas is None:
        return []
    if vc.template_replicas == "auto":
        hosts = [node.host for node in env.gpu_workers.nodes]
        return derived_sites(hosts, datastore=vc.datastore, linked=env.vm.linked_clone)
    return [ReplicaSite(host=r.host, datastore=r.datastore or vc.datastore) for r in vc.template_replicas]
