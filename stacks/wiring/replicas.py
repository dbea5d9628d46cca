"""From `vcenter.templateReplicas` to the copies of the GPU template and each worker's copy.

Creates no resources (`__main__` builds `TemplateReplicas` from the arguments returned here).
"""

from __future__ import annotations

import pulumi
import pulumi_vsphere as vsphere

from components.vsphere.template_copies.plan import ReplicaSite, assign, copy_sources
from components.vsphere.template_copies.replicas import ReplicaPlacement, TemplateReplicas, TemplateReplicasArgs
from stacks.environment.model import Environment
from stacks.environment.template_sites import replica_sites
from stacks.wiring.vsphere import Inventory


def gpu_template(env: Environment) -> str:
    return env.vcenter.gpu_template or env.vcenter.template


def worker_sites(env: Environment) -> dict[str, ReplicaSite | None]:
    """GPU worker name -> the copy it clones (None: the template itself)."""
    return assign(
        {node.name: node.host for node in env.gpu_workers.nodes},
        datastore=env.vcenter.datastore,
        linked=env.vm.linked_clone,
        sites=replica_sites(env),
        host_order=[host.name for host in env.hosts],
    )


def template_replicas_args(env: Environment, inventory: Inventory) -> TemplateReplicasArgs | None:
    """None when the stack keeps no copies (the 4-worker dev stack, or `templateReplicas: []`)."""
    sites = replica_sites(env)
    if not sites:
        return None
    vc = env.vcenter
    datastore_ids: dict[str, pulumi.Input[str]] = {vc.datastore: inventory.datastore_id}
    for site in sites:
        if site.datastore not in datastore_ids:
            datastore_ids[site.datastore] = vsphere.get_datastore_output(
                name=site.datastore, datacenter_id=inventory.datacenter_id
            ).id
    hosts = {host.name.lower(): host.name for host in env.hosts}
    sources = copy_sources(sites, linked=env.vm.linked_clone)
    return TemplateReplicasArgs(
        template_name=gpu_template(env),
        datacenter_id=inventory.datacenter_id,
        resource_pool_id=inventory.resource_pool_id,
        snapshot_name=vc.template_snapshot or "base",
        clone_timeout_minutes=env.vm.clone_timeout_minutes,
        stack=pulumi.get_stack(),
        placements=[
            ReplicaPlacement(
                key=site.key,
                host_name=hosts.get(site.host.lower(), site.host),
                host_id=inventory.host_ids[hosts.get(site.host.lower(), site.host)],
                datastore_id=datastore_ids[site.datastore],
                # Linked only beside the VMs (validate refuses a linked stack's copy elsewhere).
                linked=env.vm.linked_clone and site.datastore == vc.datastore,
                source_key=source.key if (source := sources[site.key]) is not None else None,
            )
            for site in sites
        ],
    )


def worker_template_uuids(env: Environment, replicas: TemplateReplicas | None) -> dict[str, pulumi.Output[str]]:
    """GPU worker name -> the BIOS UUID of its copy; workers that clone the template are absent."""
    if replicas is None:
        return {}
    return {name: replicas.uuids[site.key] for name, site in worker_sites(env).items() if site is not None}
