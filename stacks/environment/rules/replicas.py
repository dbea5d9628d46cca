"""Rules for `vcenter.templateReplicas`: what a copy of the GPU template cannot be."""

from __future__ import annotations

from collections.abc import Iterator

from stacks.environment.model import Environment
from stacks.environment.registry import Problem, rule
from stacks.environment.replicas import TemplateReplica


def _listed(env: Environment) -> list[TemplateReplica]:
    replicas = env.vcenter.template_replicas
    return [] if replicas is None or replicas == "auto" else replicas


@rule
def template_replicas_on_known_hosts(env: Environment) -> Iterator[Problem]:
    known = {host.name.lower() for host in env.hosts}
    seen: set[tuple[str, str]] = set()
    for i, replica in enumerate(_listed(env)):
        if replica.host.lower() not in known:
            yield Problem(
                ("vcenter", "templateReplicas", i, "host"),
                f"{replica.host!r} is not one of `hosts`: a copy is registered on a GPU host of this stack; "
                "name one of them",
            )
        site = (replica.host.lower(), (replica.datastore or env.vcenter.datastore).lower())
        if site in seen:
            yield Problem(
                ("vcenter", "templateReplicas", i),
                f"a second copy on host {replica.host!r} and datastore {site[1]!r}: one copy per host and "
                "datastore serves every clone there; remove this entry",
            )
        seen.add(site)


@rule
def linked_clone_replicas_beside_the_vms(env: Environment) -> Iterator[Problem]:
    if not env.vm.linked_clone:
        return
    datastore = env.vcenter.datastore
    for i, replica in enumerate(_listed(env)):
        if replica.datastore is not None and replica.datastore != datastore:
            yield Problem(
                ("vcenter", "templateReplicas", i, "datastore"),
                f"{replica.datastore!r} is not vcenter.datastore {datastore!r}: with vm.linkedClone each copy is a "
                "linked clone of the template's snapshot and the workers are linked clones of the copy, and a "
                "linked clone is kept on its source's datastore, so no worker could clone this copy; drop the "
                "datastore (it defaults to vcenter.datastore) or set vm.linkedClone: false",
            )
