"""`vcenter.templateReplicas`: copies of the GPU workers' template spread over the hosts.

Every clone is a provisioning operation on the host its source is registered on, and a host runs
16 units at a time (VMware performance blog, "vCenter Limits for Tasks Running at the Same Time",
2021; `stacks.tools.plan.deploy_time.durations.Durations.host_units`): with one template, 512 workers clone 16 at
a time. The program keeps copies of the template on other hosts (`components.vsphere.template_copies`)
and each worker clones the copy nearest its host (`template_copies.plan`); which copies this
environment keeps is `stacks.environment.template_sites.replica_sites`.
"""

from __future__ import annotations

from stacks.environment.base import Model
from stacks.environment.fields import NonEmpty


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
