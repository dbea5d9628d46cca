"""The copies of one template a stack keeps (`TemplateReplica` each), keyed by site.

Which sites, and which copy each VM clones, is planned without Pulumi (`replica_plan`); this
component only turns the sites into resources and hands back each copy's BIOS UUID, what a VM's
`clone.template_uuid` takes (`NodePoolArgs.template_uuids`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_vsphere as vsphere

from components.vsphere.template_copies.replica import TemplateReplica


@dataclass(frozen=True, kw_only=True)
class ReplicaPlacement:
    key: str
    """Stable key of the site (`ReplicaSite.key`): the copy's resource is `<name>-<key>`."""
    host_name: str
    """The ESXi host the copy is registered on (its vCenter name)."""
    host_id: pulumi.Input[str]
    datastore_id: pulumi.Input[str]
    linked: bool
    """A linked clone of its source's snapshot (only on the template's datastore) or a full copy."""
    source_key: str | None = None
    """The copy this one clones (its site key, placed earlier in `placements`); None: the template
    (`components.vsphere.template_copies.plan.copy_sources`: copies fan out as a tree)."""


@dataclass(frozen=True, kw_only=True)
class TemplateReplicasArgs:
    template_name: str
    """The template copied (looked up by name in the datacenter)."""
    datacenter_id: pulumi.Input[str]
    resource_pool_id: pulumi.Input[str]
    """Where the clone is placed before it becomes a template (vCenter wants a pool for a clone)."""
    placements: Sequence[ReplicaPlacement]
    snapshot_name: str = "base"
    """The copies' one snapshot; default `base`. The stack passes `vcenter.templateSnapshot`."""
    clone_timeout_minutes: int = 30
    """How long one copy's clone may take (default 30: a full copy moves the template's disk)."""
    stack: str = ""
    """The stack's name, in every copy's name (`TemplateReplica`'s `stack`); the wiring passes
    `pulumi.get_stack()`."""


class TemplateReplicas(pulumi.ComponentResource):
    uuids: dict[str, pulumi.Output[str]]
    """Per site key, the copy's BIOS UUID."""

    def __init__(self, name: str, args: TemplateReplicasArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:vsphere:TemplateReplicas", name, None, opts)
        template_id = vsphere.get_virtual_machine_output(
            name=args.template_name, datacenter_id=args.datacenter_id, opts=pulumi.InvokeOutputOptions(parent=self)
        ).id
        self.uuids = {}
        base_names: dict[str, str] = {}
        for place in args.placements:
            base_names[place.key] = f"{args.template_name}-{place.host_name.split('.')[0]}"
            if place.source_key is not None and place.source_key not in self.uuids:
                raise ValueError(f"copy {place.key}: its source {place.source_key} must be placed before it")
            # A copy of a copy clones that copy's snapshot: its uuid is an output, so the engine
            # creates the source first (and, on a destroy, deletes this copy first).
            source_uuid = template_id if place.source_key is None else self.uuids[place.source_key]
            copy = TemplateReplica(
                f"{name}-{place.key}",
                name=base_names[place.key],
                source_uuid=source_uuid,
                source_name=args.template_name if place.source_key is None else base_names[place.source_key],
                host_id=place.host_id,
                host_name=place.host_name,
                datastore_id=place.datastore_id,
                resource_pool_id=args.resource_pool_id,
                linked=place.linked,
                snapshot_name=args.snapshot_name,
                stack=args.stack,
                clone_timeout_minutes=args.clone_timeout_minutes,
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.uuids[place.key] = copy.uuid
        self.register_outputs({"uuids": self.uuids})
