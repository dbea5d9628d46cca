"""A copy of a template registered on another host: a clone source that spreads vCenter's load.

Why a dynamic provider: pulumi-vsphere's `VirtualMachine` cannot make a template; converting a VM
to an inventory template is out of scope for it (vmware/terraform-provider-vsphere#1180, closed
2026: "Converting a managed vsphere_virtual_machine in-place to a classic inventory template
(MarkAsTemplate) is out of scope"). So this provider does what an operator would: `CloneVM_Task`
of the template onto the host and datastore (powered off; with `linked`, a child of the template's
current snapshot, `createNewChildDiskBacking`, which is what pulumi-vsphere's `linked_clone`
does), one snapshot (linked clones of the copy hang off it, as they do off the template), then
`MarkAsTemplate`. The copy lives in the template's folder, beside it, named
`<template>-<host>-<stack>-<hash>`: the stack's name keeps two stacks that share a template and a
host from making one name (vCenter refuses a duplicate name in a folder). A copy made before its
name carried the stack keeps its name: `stack` is recorded in place (a rename of a live copy would
be a replacement, and every worker cloned from it would roll; a physical name takes no alias).

Keeping it in step: every input that changes what workers clone (the source's id, host, datastore,
linked, the base name) replaces it, create-before-delete, and every input at all (the resource pool
and snapshot name too) goes into the hash in the copy's name, so old and new copies never share a
name: they coexist while the workers cloned from the old one roll to the new one (their generation
includes the copy's site and the template id: `stacks.wiring.rollout`), and Pulumi deletes the old
copy at the end of the update. The resource pool and the snapshot's name are applied in place by
recording them only: a template belongs to no resource pool (the pool only places the clone before
`MarkAsTemplate`), and a linked clone hangs off the copy's current snapshot whatever its name
(pulumi-vsphere's `linked_clone` takes the current snapshot); so neither rolls a worker, and a
change to them reaches only copies made later.

`create` is idempotent but never takes a live copy (template_copies/recovery.py): an earlier
attempt's clone still running is waited for; a VM of that name already there is finished (snapshot,
mark as template) when it is a half-made copy of this very shape (the identity mark
`gpucluster.templateReplica` = its name, set in the clone's extraConfig), and a finished one is
adopted only when its owner mark (stack, source, source snapshot; also set in the clone spec) is
this resource's and no VM hangs off it. Anything else is refused: adopting another resource's live
copy would hand Pulumi its id as the new resource's, and Pulumi's create-before-delete replacement
would then delete "the old" resource, i.e. that same VM. `read` reports the live copy, or that it is
gone. `diff` reads it too (`drift`), so a copy changed by hand is seen without `pulumi refresh`:
one deleted in vCenter is replaced (a new copy; the workers cloned from it roll), one whose snapshot
or template mark was lost is finished again by `update`, in place (same uuid: no worker rolls). `delete` destroys the copy, unless a VM's disk still hangs off it: Pulumi deletes a replaced
copy left pending-delete by a failed or interrupted update at the START of the next one
(pulumi pkg/resource/deploy/deployment_executor.go, retirePendingDeletes), before the workers not
yet rolled were re-created from the new copy. Such a copy is renamed `<name>-retired` (a later copy
may take its name) and left in vCenter with a warning to delete it once the rollout is done.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import pulumi
from pyVmomi import vim

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.vcenter.errors import VsphereError
from components.vcenter.lookups import find_vm, find_vm_by_uuid
from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy, VsphereProvider, is_unknown, public_props
from components.vsphere.step_loop_reads import NotRead, read_on_step_loop
from components.vsphere.template_copies.chains import MARK, OWNER, RETIRED, dependents, read_vm
from components.vsphere.template_copies.plan import HASH_CHARS, MAX_NAME, copy_prefix
from components.vsphere.template_copies.recovery import owner_mark, refuse_unless_ours, running_clone

REPLACING_INPUTS = ("source_uuid", "host_id", "datastore_id", "linked", "name")
"""What workers clone changes: a new copy (the workers roll to it, `stacks.wiring.rollout`)."""
IN_PLACE_INPUTS = ("resource_pool_id", "snapshot_name", "source_name", "host_name", "stack")
"""Recorded only: nothing to change on a live copy (module doc). `stack` too: a live copy keeps its
name (a stack that upgrades from copies without the stack in their name, or `pulumi stack rename`)."""
SHAPE_INPUTS = (*REPLACING_INPUTS, "resource_pool_id", "snapshot_name")
"""Hashed into the copy's name: any replacement, even a forced one with new in-place inputs, makes
a copy of another name."""


def copy_name(base: str, props: dict[str, Any]) -> str:
    """`<base>-<stack>-<8 hex>`: the stack's name, so two stacks never make copies of one name
    (`plan.copy_prefix`), and the hash of what shapes the copy, so a replacement's new copy never
    has the old one's name (vCenter refuses a duplicate in a folder: DuplicateName), and a
    truncated base cannot make two shapes share one."""
    stack = props.get("stack") or None
    shape = "|".join(str(props.get(key)) for key in SHAPE_INPUTS) + (f"|{stack}" if stack else "")
    suffix = hashlib.sha256(shape.encode()).hexdigest()[:HASH_CHARS]
    return f"{copy_prefix(base, stack)}{suffix}"


def _moref(kind: type, moid: str, si: Any) -> Any:
    return kind(moid, si._stub)


def _source(si: Any, props: dict[str, Any]) -> tuple[Any, Any | None]:
    """The template to copy, and the snapshot a linked copy hangs off (None for a full copy)."""
    source = find_vm_by_uuid(si, props["source_uuid"])
    if source is None:
        raise VsphereError(
            f"template {props['source_name']!r} (uuid {props['source_uuid']}) not found: it was removed or "
            "rebuilt after the plan; run `pulumi up` again",
            object_name=props["source_name"],
        )
    if not props["linked"]:
        return source, None
    snapshot = read_vm(si, source).get("snapshot")
    current = snapshot.currentSnapshot if snapshot is not None else None
    if current is None:
        raise VsphereError(
            f"template {props['source_name']!r} has no snapshot: a linked copy hangs off it "
            "(vcenter.templateSnapshot; take one, or set vm.linkedClone: false)",
            object_name=props["source_name"],
        )
    return source, current


def _clone(si: Any, props: dict[str, Any], name: str, timeout: float, source: Any, snapshot: Any | None) -> Any:
    relocate = vim.vm.RelocateSpec(
        host=_moref(vim.HostSystem, props["host_id"], si),
        datastore=_moref(vim.Datastore, props["datastore_id"], si),
        pool=_moref(vim.ResourcePool, props["resource_pool_id"], si),
    )
    # Both marks go in the clone spec, so the VM carries them from the moment it exists
    # (recovery.py: what a re-run may adopt).
    mark = vim.vm.ConfigSpec(
        extraConfig=[
            vim.option.OptionValue(key=MARK, value=name),
            vim.option.OptionValue(key=OWNER, value=owner_mark(props, snapshot)),
        ]
    )
    spec = vim.vm.CloneSpec(location=relocate, powerOn=False, template=False, config=mark)
    if snapshot is not None:
        relocate.diskMoveType = "createNewChildDiskBacking"
        spec.snapshot = snapshot
    task = source.CloneVM_Task(folder=source.parent, name=name, spec=spec)
    return wait_for_task(task, timeout=timeout, object_name=name, what="clone of the template copy")


def _finish(si: Any, vm: Any, props: dict[str, Any]) -> None:
    """Snapshot, then mark as template: each step skipped when an earlier attempt did it. A template
    whose snapshot was removed by hand is made a VM again first (a template takes no snapshot)."""
    now = read_vm(si, vm)
    if now.get("config.template") and now.get("snapshot") is None:
        vm.MarkAsVirtualMachine(
            pool=_moref(vim.ResourcePool, props["resource_pool_id"], si),
            host=_moref(vim.HostSystem, props["host_id"], si),
        )
        now = read_vm(si, vm)
    if not now.get("config.template"):
        if now.get("snapshot") is None:
            task = vm.CreateSnapshot_Task(
                name=props["snapshot_name"],
                description="clone source of the stack's workers (gpucluster TemplateReplica)",
                memory=False,
                quiesce=False,
            )
            wait_for_task(task, object_name=vm.name, what="snapshot of the template copy")
        vm.MarkAsTemplate()


GONE = "deleted in vCenter"


def drift(si: Any, uuid: str) -> str | None:
    """What changed on the live copy behind Pulumi's back: `GONE`, or what a linked clone of it
    would miss (its snapshot, its template mark); None when it is as made."""
    vm = find_vm_by_uuid(si, uuid)
    if vm is None:
        return GONE
    now = read_vm(si, vm)
    if now.get("snapshot") is None:
        return "its snapshot was removed in vCenter"
    if not now.get("config.template"):
        return "it was turned back into a VM in vCenter"
    return None


def _outputs(si: Any, vm: Any, props: dict[str, Any]) -> dict[str, Any]:
    now = read_vm(si, vm)
    info = now.get("snapshot")
    current = info.currentSnapshot if info is not None else None
    names = [tree.name for tree in (info.rootSnapshotList if info is not None else []) if tree.snapshot == current]
    outs = {**public_props(props), "uuid": now["config.uuid"], "vm_name": now["name"]}
    return {**outs, "snapshot": names[0] if names else ""}


class TemplateReplicaProvider(VsphereProvider):
    def __init__(self, *, clone_timeout_minutes: float = 30, retry: RetryPolicy | None = None) -> None:
        super().__init__(retry=retry)
        self.clone_timeout_minutes = clone_timeout_minutes
        self._adopted: set[str] = set()
        """uuids of finished copies this process adopted (recovery.py): never destroyed by it."""

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        replaces = [key for key in REPLACING_INPUTS if is_unknown(news.get(key)) or news.get(key) != olds.get(key)]
        changes = replaces or [key for key in IN_PLACE_INPUTS if news.get(key) != olds.get(key)]
        if not replaces and self.has_connection_settings:
            # Drift: the copy read now, not only at `pulumi refresh` (issue 32 item 8). Without
            # credentials (a preview where `check` must work offline) there is nothing to read.
            # On the engine's step loop: a bounded read, skipped past its budget (step_loop_reads.py).
            name = olds.get("vm_name") or _id
            found = read_on_step_loop(self, lambda si: drift(si, _id), what=f"read template copy {name}")
            if isinstance(found, NotRead):
                pulumi.log.warn(f"template copy {name!r}: drift not checked ({found.why}); `pulumi refresh` reads it")
            elif found == GONE:
                pulumi.log.warn(f"template copy {name!r} was {GONE}: a new copy is made; workers cloned from it roll")
                replaces = ["uuid"]
            elif found:
                pulumi.log.warn(f"template copy {name!r}: {found}; `pulumi up` takes its snapshot again, in place")
                changes = ["snapshot"]
        # Create-before-delete: workers still hang off the old copy until they rolled (module doc).
        return handlers.DiffResult(
            changes=bool(changes or replaces), replaces=replaces, delete_before_replace=False
        )

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        name = copy_name(props["name"], props)
        # The resource's own input (a setting of the provider object while it was a dynamic
        # provider; states from then lack it: the default applies).
        timeout = float(props.get("clone_timeout_minutes") or self.clone_timeout_minutes) * 60

        made: set[str] = set()

        def make(si: Any) -> dict[str, Any]:
            source, snapshot = _source(si, props)
            # An earlier attempt's copy: made, half-made, or still being cloned (recovery.py).
            vm = find_vm(si, name) or running_clone(si, source, name, timeout=timeout)
            if vm is None:
                try:
                    vm = _clone(si, props, name, timeout, source, snapshot)
                    made.add(read_vm(si, vm)["config.uuid"])
                except VsphereError as exc:
                    # Another clone of the name landed first (an attempt whose task we did not see).
                    vm = find_vm(si, name) if isinstance(exc.fault, vim.fault.DuplicateName) else None
                    if vm is None:
                        raise
            if refuse_unless_ours(si, vm, name, owner_mark(props, snapshot), made):
                self._adopted.add(read_vm(si, vm)["config.uuid"])
            _finish(si, vm, props)
            return _outputs(si, vm, props)

        # The clone's own wait bounds each attempt; the deadline covers a retry after a lost session.
        policy = replace(self.retry, max_total=max(self.retry.max_total, 2 * timeout))
        outs = self.run(make, what=f"copy {name} of template {props['source_name']}", retry=policy)
        return handlers.CreateResult(id_=outs["uuid"], outs=outs)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        # IN_PLACE_INPUTS: recorded (module doc); and a copy whose snapshot or template mark was
        # lost (`drift`) is finished again, keeping its uuid: no worker rolls. `vm_name` and
        # `snapshot` report the live copy.
        inputs = {key: value for key, value in public_props(news).items() if key not in ("uuid", "vm_name", "snapshot")}

        def repair(si: Any) -> dict[str, Any]:
            vm = find_vm_by_uuid(si, _id)
            if vm is None:
                raise VsphereError(
                    f"template copy {_olds.get('vm_name') or _id} was deleted in vCenter; run `pulumi up` again "
                    "(its diff then makes a new one)",
                    object_name=_olds.get("vm_name"),
                )
            _finish(si, vm, {**_olds, **inputs})
            return _outputs(si, vm, {**_olds, **inputs})

        live = self.run(repair, what=f"update template copy {_olds.get('vm_name') or _id}")
        return handlers.UpdateResult(outs={**_olds, **inputs, "vm_name": live["vm_name"], "snapshot": live["snapshot"]})

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        def look(si: Any) -> dict[str, Any] | None:
            vm = find_vm_by_uuid(si, id_)
            return None if vm is None else _outputs(si, vm, props)

        outs = self.run(look, what=f"read template copy {id_}")
        return handlers.ReadResult(id_=id_ if outs else "", outs=outs or {})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        if id_ in self._adopted:
            # The old half of a replacement whose new half adopted this very VM (recovery.py):
            # it is the new resource's copy now.
            pulumi.log.warn(f"template copy {props.get('vm_name', id_)!r} kept: the replacing resource took it over")
            return

        def destroy(si: Any) -> None:
            vm = find_vm_by_uuid(si, id_)
            if vm is None:
                return
            name = vm.name  # read first: the object is gone once the task ran
            children = dependents(si, vm)
            if not children:
                wait_for_task(vm.Destroy_Task(), object_name=name, what="removal of the template copy")
                return
            retired = name if name.endswith(RETIRED) else f"{name[: MAX_NAME - len(RETIRED)]}{RETIRED}"
            if retired != name:
                wait_for_task(vm.Rename_Task(newName=retired), object_name=name, what="retiring the template copy")
            # In the gpucluster plugin pulumi.log goes to the engine's Log service (provider/main.py),
            # which shows it in the update's output.
            pulumi.log.warn(
                f"template copy {retired!r} kept in vCenter: linked clones still hang off it "
                f"({', '.join(children[:5])}{', ...' if len(children) > 5 else ''}). Once the rollout "
                "finished, `python -m stacks retired-copies STACK --delete` removes it when no VM hangs off it any more "
                "(docs/deployment-time.md, template copies)"
            )

        self.run(destroy, what=f"remove template copy {props.get('vm_name', id_)}")


class TemplateReplica(GpuclusterResource, module="vsphere", name="TemplateReplica"):
    """A copy of a template on a host and datastore, itself a template with one snapshot.

    Type token: `gpucluster:vsphere:TemplateReplica`. Its id and `uuid` are the copy's
    BIOS UUID: what pulumi-vsphere's `clone.template_uuid` takes."""

    uuid: pulumi.Output[str]
    """BIOS UUID of the copy (`config.uuid`)."""
    vm_name: pulumi.Output[str]
    """The copy's name in vCenter: `<name>-<hash of what shapes it>`."""
    snapshot: pulumi.Output[str]
    """Name of the copy's current snapshot (linked clones hang off it)."""

    def __init__(
        self,
        resource_name: str,
        *,
        name: str,
        source_uuid: pulumi.Input[str],
        source_name: str,
        host_id: pulumi.Input[str],
        host_name: str,
        datastore_id: pulumi.Input[str],
        resource_pool_id: pulumi.Input[str],
        linked: bool,
        snapshot_name: str,
        stack: str = "",
        clone_timeout_minutes: int = 30,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """
        :param name: the copy's name in vCenter before its hash suffix, e.g. `<template>-esxi-01`.
        :param source_uuid: the BIOS UUID of what is copied: the template (`get_virtual_machine(...).id`)
            or an earlier copy of it (its `uuid`), a template with a snapshot too (`plan.copy_sources`).
        :param host_id, datastore_id, resource_pool_id: managed object ids where the copy goes.
        :param linked: a linked clone of the template's current snapshot (seconds, little space) or a
            full copy of its disk (minutes; the only kind that may sit on another datastore).
        :param snapshot_name: the copy's one snapshot (`vcenter.templateSnapshot`, or any name).
        :param stack: the stack's name, in the copy's name: two stacks with the same template and
            host make copies of their own (`pulumi.get_stack()`).
        """
        super().__init__(
            resource_name,
            {
                "name": name,
                "source_uuid": source_uuid,
                "source_name": source_name,
                "host_id": host_id,
                "host_name": host_name,
                "datastore_id": datastore_id,
                "resource_pool_id": resource_pool_id,
                "linked": linked,
                "snapshot_name": snapshot_name,
                "clone_timeout_minutes": clone_timeout_minutes,
                "stack": stack,
                "uuid": None,
                "vm_name": None,
                "snapshot": None,
            },
            opts,
        )
