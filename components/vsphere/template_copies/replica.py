"""A copy of a template registered on another host: a clone source that spreads vCenter's load.

Why a dynamic provider: pulumi-vsphere's `VirtualMachine` cannot make a template; converting a VM
to an inventory template is out of scope for it (vmware/terraform-provider-vsphere#1180, closed
2026: "Converting a managed vsphere_virtual_machine in-place to a classic inventory template
(MarkAsTemplate) is out of scope"). So this provider does what an operator would: `CloneVM_Task`
of the template onto the host and datastore (powered off; with `linked`, a child of the template's
current snapshot, `createNewChildDiskBacking`, which is what pulumi-vsphere's `linked_clone`
does), one snapshot (linked clones of the copy hang off it, as they do off the template), then
`MarkAsTemplate`. The copy lives in the template's folder, beside it.

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

`create` is idempotent but never takes a live copy: a VM of that name already there is finished
(snapshot, mark as template) only when it is a half-made copy of this very shape (the identity
mark `gpucluster.templateReplica` = its name, set in the clone's extraConfig), or the one this
create cloned before a lost session. A finished template of that name, or a VM without the mark,
is refused: adopting it would hand Pulumi the live copy's id as the new resource's, and Pulumi's
create-before-delete replacement would then delete "the old" resource, i.e. that same VM
(`pulumi up --replace` of a copy does exactly that). `read` reports the live copy, or that it is
gone. `delete` destroys the copy, unless a VM's disk still hangs off it: Pulumi deletes a replaced
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
from pyVmomi import vim, vmodl

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.vcenter.errors import VsphereError
from components.vcenter.lookups import collect_properties, find_vm, find_vm_by_uuid
from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy, VsphereProvider, is_unknown, public_props

REPLACING_INPUTS = ("source_uuid", "host_id", "datastore_id", "linked", "name")
"""What workers clone changes: a new copy (the workers roll to it, `stacks.wiring.rollout`)."""
IN_PLACE_INPUTS = ("resource_pool_id", "snapshot_name", "source_name", "host_name")
"""Recorded only: nothing to change on a live copy (module doc)."""
SHAPE_INPUTS = (*REPLACING_INPUTS, "resource_pool_id", "snapshot_name")
"""Hashed into the copy's name: any replacement, even a forced one with new in-place inputs, makes
a copy of another name."""
MARK = "gpucluster.templateReplica"
"""extraConfig key on a copy: its own name, set by its clone; what `create` may adopt."""
MAX_NAME = 80
"""vCenter's longest inventory name."""
RETIRED = "-retired"
"""Suffix of a copy left in vCenter because linked clones still hang off it (module doc)."""


def copy_name(base: str, props: dict[str, Any]) -> str:
    """`<base>-<8 hex>`: the hash of what shapes the copy, so a replacement's new copy never has the
    old one's name (vCenter refuses a duplicate in a folder: DuplicateName), and a truncated base
    cannot make two shapes share one."""
    shape = "|".join(str(props.get(key)) for key in SHAPE_INPUTS)
    suffix = hashlib.sha256(shape.encode()).hexdigest()[:8]
    return f"{base[: MAX_NAME - 9]}-{suffix}"


def _moref(kind: type, moid: str, si: Any) -> Any:
    return kind(moid, si._stub)


READ = ("snapshot", "config.template", "config.uuid", "name", "config.extraConfig")


def _read(si: Any, vm: Any, paths: tuple[str, ...] = READ) -> dict[str, Any]:
    """`snapshot`, `config.template`, `config.uuid`, `name` of one VM in one collector call: an unset
    property (`snapshot` of a VM without one) is absent here, where pyVmomi's accessor makes
    govmomi's simulator drop the connection (components/vcenter/lookups.py, collect_properties)."""
    collector = si.RetrieveContent().propertyCollector
    spec = vmodl.query.PropertyCollector.FilterSpec(
        objectSet=[vmodl.query.PropertyCollector.ObjectSpec(obj=vm, skip=False)],
        propSet=[
            vmodl.query.PropertyCollector.PropertySpec(
                type=vim.VirtualMachine,
                pathSet=list(paths),
            )
        ],
    )
    found = collector.RetrieveContents([spec])
    return {prop.name: prop.val for obj in found for prop in obj.propSet}


def _clone(si: Any, props: dict[str, Any], name: str, timeout: float) -> Any:
    source = find_vm_by_uuid(si, props["source_uuid"])
    if source is None:
        raise VsphereError(
            f"template {props['source_name']!r} (uuid {props['source_uuid']}) not found: it was removed or "
            "rebuilt after the plan; run `pulumi up` again",
            object_name=props["source_name"],
        )
    relocate = vim.vm.RelocateSpec(
        host=_moref(vim.HostSystem, props["host_id"], si),
        datastore=_moref(vim.Datastore, props["datastore_id"], si),
        pool=_moref(vim.ResourcePool, props["resource_pool_id"], si),
    )
    mark = vim.vm.ConfigSpec(extraConfig=[vim.option.OptionValue(key=MARK, value=name)])
    spec = vim.vm.CloneSpec(location=relocate, powerOn=False, template=False, config=mark)
    if props["linked"]:
        snapshot = _read(si, source).get("snapshot")
        current = snapshot.currentSnapshot if snapshot is not None else None
        if current is None:
            raise VsphereError(
                f"template {props['source_name']!r} has no snapshot: a linked copy hangs off it "
                "(vcenter.templateSnapshot; take one, or set vm.linkedClone: false)",
                object_name=props["source_name"],
            )
        relocate.diskMoveType = "createNewChildDiskBacking"
        spec.snapshot = current
    task = source.CloneVM_Task(folder=source.parent, name=name, spec=spec)
    return wait_for_task(task, timeout=timeout, object_name=name, what="clone of the template copy")


def _check_adoptable(si: Any, vm: Any, name: str, made: set[str]) -> None:
    """Refuse a VM of the copy's name that this resource must not take over (module doc)."""
    now = _read(si, vm)
    if now.get("config.uuid") in made:
        return  # cloned by this very create, before a lost session
    marks = {opt.key: opt.value for opt in now.get("config.extraConfig") or []}
    if now.get("config.template") or marks.get(MARK) != name:
        raise VsphereError(
            f"a VM named {name!r} already exists ({'a template' if now.get('config.template') else 'not marked'} "
            f"{MARK}={marks.get(MARK)!r}) and is not a half-made copy of this one: it is another resource's live "
            "copy (a forced `pulumi up --replace` of the copy, or another stack with the same inputs) or one an "
            "interrupted `pulumi up` finished; it is left alone. Delete it in vCenter once no worker clones from "
            "it, or `pulumi import` it, then run `pulumi up` again",
            object_name=name,
        )


def _finish(si: Any, vm: Any, props: dict[str, Any]) -> None:
    """Snapshot, then mark as template: each step skipped when an earlier attempt did it."""
    now = _read(si, vm)
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


def _outputs(si: Any, vm: Any, props: dict[str, Any]) -> dict[str, Any]:
    now = _read(si, vm)
    info = now.get("snapshot")
    current = info.currentSnapshot if info is not None else None
    names = [tree.name for tree in (info.rootSnapshotList if info is not None else []) if tree.snapshot == current]
    outs = {**public_props(props), "uuid": now["config.uuid"], "vm_name": now["name"]}
    return {**outs, "snapshot": names[0] if names else ""}


def _backing_files(device: Any) -> list[str]:
    """A disk's file and every parent's down its chain (a linked clone's `backing.parent`...)."""
    files, backing = [], getattr(device, "backing", None)
    while backing is not None:
        if getattr(backing, "fileName", None):
            files.append(backing.fileName)
        backing = getattr(backing, "parent", None)
    return files


def _disks(devices: Any) -> list[Any]:
    return [device for device in devices or [] if isinstance(device, vim.vm.device.VirtualDisk)]


def dependents(si: Any, vm: Any) -> list[str]:
    """Names of the VMs whose disk chain reaches into the copy's folder: linked clones of it.

    On vCenter a linked clone's `VirtualDisk.backing.parent` chain names its source's snapshot disk
    (createNewChildDiskBacking). Only files in the copy's own folder count: a linked copy's chain
    goes on into the template's disk, which workers cloned from the template share."""
    own = _read(si, vm, ("config.files.vmPathName", "config.hardware.device"))
    path = own.get("config.files.vmPathName", "")
    folder = path.rsplit("/", 1)[0] + "/" if "/" in path else None
    files = {name for disk in _disks(own.get("config.hardware.device")) for name in _backing_files(disk)}
    found = []
    everyone = collect_properties(
        si, si.RetrieveContent().rootFolder, vim.VirtualMachine, ["name", "config.hardware.device"]
    )
    for obj, props in everyone:
        if obj._moId == vm._moId:
            continue
        chain = [name for disk in _disks(props.get("config.hardware.device")) for name in _backing_files(disk)[1:]]
        if any((folder is not None and name.startswith(folder)) or name in files for name in chain):
            found.append(props.get("name", obj._moId))
    return sorted(found)


class TemplateReplicaProvider(VsphereProvider):
    def __init__(self, *, clone_timeout_minutes: float = 30, retry: RetryPolicy | None = None) -> None:
        super().__init__(retry=retry)
        self.clone_timeout_minutes = clone_timeout_minutes

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        replaces = [key for key in REPLACING_INPUTS if is_unknown(news.get(key)) or news.get(key) != olds.get(key)]
        changes = replaces or [key for key in IN_PLACE_INPUTS if news.get(key) != olds.get(key)]
        # Create-before-delete: workers still hang off the old copy until they rolled (module doc).
        return handlers.DiffResult(changes=bool(changes), replaces=replaces, delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        name = copy_name(props["name"], props)
        # The resource's own input (a setting of the provider object while it was a dynamic
        # provider; states from then lack it: the default applies).
        timeout = float(props.get("clone_timeout_minutes") or self.clone_timeout_minutes) * 60

        made: set[str] = set()

        def make(si: Any) -> dict[str, Any]:
            vm = find_vm(si, name)
            if vm is None:
                vm = _clone(si, props, name, timeout)
                made.add(_read(si, vm)["config.uuid"])
            else:
                _check_adoptable(si, vm, name, made)
            _finish(si, vm, props)
            return _outputs(si, vm, props)

        # The clone's own wait bounds each attempt; the deadline covers a retry after a lost session.
        policy = replace(self.retry, max_total=max(self.retry.max_total, 2 * timeout))
        outs = self.run(make, what=f"copy {name} of template {props['source_name']}", retry=policy)
        return handlers.CreateResult(id_=outs["uuid"], outs=outs)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        # IN_PLACE_INPUTS only: recorded; `snapshot` keeps reporting the copy's real snapshot (module doc).
        inputs = {key: value for key, value in public_props(news).items() if key not in ("uuid", "vm_name", "snapshot")}
        return handlers.UpdateResult(outs={**_olds, **inputs})

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        def look(si: Any) -> dict[str, Any] | None:
            vm = find_vm_by_uuid(si, id_)
            return None if vm is None else _outputs(si, vm, props)

        outs = self.run(look, what=f"read template copy {id_}")
        return handlers.ReadResult(id_=id_ if outs else "", outs=outs or {})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
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
                f"({', '.join(children[:5])}{', ...' if len(children) > 5 else ''}). Delete it in vCenter "
                "once the rollout finished and no worker clones from it (docs/deployment-time.md, template copies)"
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
        clone_timeout_minutes: int = 30,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """
        :param name: the copy's name in vCenter before its hash suffix, e.g. `<template>-esxi-01`.
        :param source_uuid: the template's BIOS UUID (`get_virtual_machine(...).id`).
        :param host_id, datastore_id, resource_pool_id: managed object ids where the copy goes.
        :param linked: a linked clone of the template's current snapshot (seconds, little space) or a
            full copy of its disk (minutes; the only kind that may sit on another datastore).
        :param snapshot_name: the copy's one snapshot (`vcenter.templateSnapshot`, or any name).
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
                "uuid": None,
                "vm_name": None,
                "snapshot": None,
            },
            opts,
        )
