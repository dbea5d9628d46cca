"""A copy's create, again: what a retry or a re-run finds of an earlier attempt, and what of it
is provably its own.

An attempt can lose its answer at any point of a clone: a reset connection, a vCenter that stops
answering, a plugin killed mid-operation (`pulumi up` interrupted, then run again). What the next
attempt may find, and does:

- **The clone still running.** vCenter copies disks for seconds to minutes before the clone's VM
  exists, so a lookup by name finds nothing; a second clone would make a second VM of the name
  (or fail with DuplicateName once the first one lands). vCenter posted a `VmBeingClonedEvent`
  naming the destination (`destName`) when the clone started, in the clone task's event chain
  (vSphere API reference: VmBeingClonedEvent; TaskInfo.eventChainId). `running_clone` finds that
  task among the running tasks on the source and waits for it; its result is the copy.
- **A half-made copy** (cloned, not yet a template): finished by `replica._finish`, as before.
- **A finished copy whose answer was lost** (the plugin was killed after `MarkAsTemplate`): adopted
  when it is provably this resource's: its identity mark (`MARK`, the copy's own name, which
  hashes the stack and every input that shapes it) and its owner mark (`OWNER`: the stack, the
  source's uuid and the source's current snapshot, both written in the clone spec, so before the
  VM existed), and no VM's disk hangs off it. A copy a create never answered for cannot have
  workers cloned from it (they take its uuid from that answer); one that has them is another
  resource's live copy (a forced `pulumi up --replace` of a copy makes a copy of the same name)
  and is refused, as is a VM without our marks.

An adopted finished copy is remembered by the plugin process: Pulumi's create-before-delete
replacement deletes "the old" resource right after creating the new one, and if the new one
adopted the old one's VM that delete must leave it (`replica.TemplateReplicaProvider.delete`).
"""

from __future__ import annotations

from typing import Any

from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.tasks import active_tasks, wait_for_task
from components.vsphere.template_copies.chains import MARK, OWNER, dependents, read_vm

_CLONE_TASK = "VirtualMachine.clone"
"""descriptionId of CloneVM_Task as vCenter reports it (the method's vmodl name; the harness reports
it so too, vcsim/task_names.go)."""


def owner_mark(props: dict[str, Any], snapshot: Any | None) -> str:
    """`<stack>|<source uuid>|<source snapshot moId>`: who made the copy, from what."""
    snapshot_id = snapshot._moId if snapshot is not None else ""
    return f"{props.get('stack') or ''}|{props['source_uuid']}|{snapshot_id}"


def marks(si: Any, vm: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The VM's properties (`chains.READ`) and its extraConfig as a dict."""
    now = read_vm(si, vm)
    return now, {opt.key: opt.value for opt in now.get("config.extraConfig") or []}


def running_clone(si: Any, source: Any, name: str, *, timeout: float) -> Any | None:
    """The VM of an earlier attempt's clone to `name`, waited for while it runs; None when no
    clone of that name is running (none started, or it failed: clone again)."""
    manager = si.RetrieveContent().eventManager
    spec = vim.event.EventFilterSpec(
        entity=vim.event.EventFilterSpec.ByEntity(entity=source, recursion="self"),
        eventTypeId=["VmBeingClonedEvent"],
    )
    chains = {event.chainId for event in manager.QueryEvents(spec) or [] if getattr(event, "destName", None) == name}
    if not chains:
        return None
    for task, info in active_tasks(si, source, _CLONE_TASK):
        if info.eventChainId not in chains:
            continue
        try:
            return wait_for_task(task, timeout=timeout, object_name=name, what="the running clone of the template copy")
        except VsphereError:
            return None  # it failed (a name taken meanwhile, a datastore full): the caller looks again
    return None


def refuse_unless_ours(si: Any, vm: Any, name: str, owner: str, made: set[str]) -> bool:
    """Raise unless the VM of the copy's name is provably this create's (module doc).
    Returns True when it is a finished copy adopted as it is (a template with our marks)."""
    now, extra = marks(si, vm)
    if now.get("config.uuid") in made:
        return False  # cloned by this very create, before a lost session
    template = bool(now.get("config.template"))
    why = None
    if extra.get(MARK) != name:
        why = f"it is not marked {MARK}={name!r} (found {extra.get(MARK)!r})"
    elif extra.get(OWNER) not in (None, owner) or (template and extra.get(OWNER) != owner):
        why = f"its owner mark {OWNER}={extra.get(OWNER)!r} is not this stack's from this source ({owner!r})"
    elif template and (children := dependents(si, vm)):
        why = f"VMs are cloned from it ({', '.join(children[:3])}): it is a live copy of another resource"
    if why is None:
        return template
    raise VsphereError(
        f"a VM named {name!r} already exists and is not this copy's: {why}. It is left alone: another resource's "
        "live copy (a forced `pulumi up --replace` of the copy, or a stack of the same name in another project or "
        "backend) or a VM made by hand. Never `pulumi import` it: two resources would own one VM, and the first to "
        "replace or delete it takes the other's clone source. If no stack's workers clone from it, delete it in "
        "vCenter, then run `pulumi up` again; else undo the change that replaced the copy",
        object_name=name,
    )
