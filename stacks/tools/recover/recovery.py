"""Recovery of one stack: the program's resources (run under the mock runtime, as `plan` runs it),
each classified (`kinds`), the vSphere ones found in vCenter (`finders`), and the import document.

The names come from the program itself, not from a second derivation: the mock run records the
exact `name`/`path`/`folder` inputs each pulumi-vsphere resource is registered with, and those
are what vCenter shows. Only ids differ under mocks (lookups answer made-up morefs), so nothing
here relies on an id from the run except to map a vmknic's host id back to the host's name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from stacks.environment.model import Environment
from stacks.tools.plan.mock_runtime import ProgramRun, RecordedResource
from stacks.tools.plan.mock_values import fake_invoke_result
from stacks.tools.recover import finders, kinds

ROOT_STACK = "pulumi:pulumi:Stack"


@dataclass(frozen=True)
class Found:
    resource: RecordedResource
    id: str


@dataclass
class Recovery:
    imported: list[Found] = field(default_factory=list)
    """Found in vCenter and not in the state: written to the import file."""
    absent: list[RecordedResource] = field(default_factory=list)
    """Not in vCenter: not created yet, nothing to import (`pulumi up` creates it)."""
    in_state: list[RecordedResource] = field(default_factory=list)
    """Already in the `--state` export: skipped."""
    adopted: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Type -> (count, what a re-run of `pulumi up` does for it)."""
    unclassified: list[str] = field(default_factory=list)
    """Types no rule covers (`kinds.classify`): the answer is incomplete."""
    template_copies: list[finders.TemplateCopy] = field(default_factory=list)
    resources: dict[str, RecordedResource] = field(default_factory=dict)
    """Every resource of the run, by URN (parents for the import document)."""


def _vnic_context(run: ProgramRun, env: Environment) -> tuple[dict[str, str], dict[str, str]]:
    """Host id (as the mock run answered `getHost`) -> host name; parent URN -> its port group name."""
    host_ids = {
        str(fake_invoke_result("vsphere:index/getHost:getHost", {"name": host.name})["id"]): host.name
        for host in env.hosts
    }
    port_groups = {r.parent or "": str(r.plain_inputs()["name"]) for r in run.by_type(kinds.PORT_GROUP)}
    return host_ids, port_groups


def _ordered(resources: Iterable[RecordedResource]) -> list[RecordedResource]:
    """Port groups before vmknics: a vmknic is matched by its port group's key."""
    return sorted(resources, key=lambda r: r.type == kinds.VNIC)


def recover(
    run: ProgramRun, env: Environment, si: Any, *, stack: str, state_urns: frozenset[str] = frozenset()
) -> Recovery:
    result = Recovery(resources={r.urn: r for r in run.resources})
    scope = finders.scope_for(si, env.vcenter.datacenter, env.vcenter.compute_cluster)
    host_ids, port_groups = _vnic_context(run, env)
    for resource in _ordered(r for r in run.resources if r.custom):
        kind = kinds.classify(resource.type)
        if kind.name == "UNCLASSIFIED":
            if resource.type not in result.unclassified:
                result.unclassified.append(resource.type)
            continue
        if kind.name != "IMPORTED":
            count, _ = result.adopted.get(resource.type, (0, ""))
            result.adopted[resource.type] = (count + 1, kind.note)
            continue
        inputs = resource.plain_inputs()
        found = finders.find_id(
            scope,
            resource.type,
            inputs,
            host_name=host_ids.get(str(inputs.get("host"))),
            port_group=port_groups.get(resource.parent or ""),
        )
        if resource.urn in state_urns:
            result.in_state.append(resource)
        elif found is None:
            result.absent.append(resource)
        else:
            result.imported.append(Found(resource, found))
    bases = [t for t in (env.vcenter.template, env.vcenter.gpu_template) if t]
    result.template_copies = finders.template_copies(si, scope, list(dict.fromkeys(bases)), stack)
    return result


def import_document(recovery: Recovery, state_urns: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The `pulumi import --file` document (https://www.pulumi.com/docs/iac/cli/commands/pulumi_import/:
    `resources` of `type`, `name`, `id`, `parent`; `nameTable` maps a parent's name to its URN).

    Each entry's `name` is a key unique in the file; `logicalName`, where it differs, is the name
    the program gives the resource. A parent component the state lacks is an entry of its own with
    `component: true` (the engine creates it empty, Pulumi 3.94.0, pulumi/pulumi#14467) and is
    named by its key (no nameTable entry needed for a resource in the same file: #14524); one the
    state has goes in `nameTable` with its URN. The root stack is every entry's default parent.
    """
    keys: dict[str, str] = {}
    taken: set[str] = set()

    def key_of(resource: RecordedResource) -> str:
        if resource.urn not in keys:
            key, n = resource.name, 1
            while key in taken:
                n += 1
                key = f"{resource.name}-{n}"
            taken.add(key)
            keys[resource.urn] = key
        return keys[resource.urn]

    entries: list[dict[str, Any]] = []
    name_table: dict[str, str] = {}
    components: set[str] = set()

    def entry(resource: RecordedResource, **more: Any) -> dict[str, Any]:
        item: dict[str, Any] = {"type": resource.type, "name": key_of(resource)}
        if item["name"] != resource.name:
            item["logicalName"] = resource.name
        parent = recovery.resources.get(resource.parent or "")
        if parent is not None and parent.type != ROOT_STACK:
            item["parent"] = key_of(parent)
            if parent.urn in state_urns:
                name_table[key_of(parent)] = parent.urn
            elif parent.urn not in components:
                components.add(parent.urn)
                entries.append(entry(parent, component=True))
        return item | more

    for found in recovery.imported:
        entries.append(entry(found.resource, id=found.id))
    document: dict[str, Any] = {"resources": entries}
    if name_table:
        document["nameTable"] = name_table
    return document
