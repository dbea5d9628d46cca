"""`vcenter.templateReplicas`: copies of the GPU workers' template spread over the hosts.

Every clone is a provisioning operation on the host its source is registered on, and a host runs
16 units at a time (VMware performance blog, "vCenter Limits for Tasks Running at the Same Time",
2021; `stacks.tools.deploy_time.durations.Durations.host_units`): with one template, 512 workers clone 16 at
a time. The program keeps copies of the template on other hosts (`components.vsphere.
template_replica`) and each worker clones the copy nearest its host (`components.vsphere.
replica_plan`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from components.vsphere.template_copies.plan import ReplicaSite, derived_sites
from stacks.environment.base import Model
from stacks.environment.fields import NonEmpty

if TYPE_CHECKING:
    from stacks.environment.model import Environment


class TemplateReplica(Model):
    """Where one copy of the GPU workers' template lives."""

    host: NonEmpty
    """The ESXi host (one of `hosts`) the copy is registered on: clones from it use this host's
    provisioning units instead of the template's host's."""
    datastore: str | None = None
    """Datastore of the copy's files; default `vcenter.datastore`, where every VM's disk is. With
    `vm.linkedClone` it must be that one: the program keeps a linked clone on its source's
    datastore, and the copy is itself a linked clone of the template's snapshot. A copy on another
    datastore is a full copy (minutes, the template's disk size in space) and serves full clones."""


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
