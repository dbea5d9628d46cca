"""Several hosts' switch memberships in one `ReconfigureDvs_Task`.

vCenter runs one reconfigure of a switch at a time (vcsim/dvs_reconfigure.go), and one takes
about as long for many hosts as for one: the Add Hosts workflow of the vSphere Client and
terraform-provider-vsphere's `host` blocks of `vsphere_distributed_virtual_switch` send every
host's `DistributedVirtualSwitchHostMemberConfigSpec` in one `DVSConfigSpec.host` list. 512
joins one after the other are ~2h50m at ~20 s each; in batches they are a few reconfigures.

Each host keeps its own `DvsHostMember` resource (day two removes one host); the plugin gathers
the changes that arrive together (`provider/switch_batch.py`) and applies them here. A host that
cannot be found fails alone; a fault of the reconfigure itself fails the batch (a task either
applies the whole spec or none of it), and the batcher then splits the batch until the host at
fault is alone, so the others go ahead and its error is its own.

Which faults are worth a retry here: `ConcurrentAccess` (another client's change made the
configVersion stale; a new read gets past it). Not `DvsOperationBulkFault`: it carries each
host's own reason (`hostFault[]`: a pNIC the host does not have, a vmknic still on the switch),
which a retry meets again. The one `DvsOperationBulkFault` a retry would get past, "another
operation is in progress", comes from a reconfigure still running, and the likeliest one is our
own, whose answer a reset connection lost: each attempt waits for the switch's running
reconfigure first (`active_tasks`).

A switch that is gone has no members: a leave from it is done, a join fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.faults import fault_text
from components.vcenter.lookups import find_host_or_none
from components.vcenter.tasks import active_tasks, wait_for_task
from components.vsphere.dvs_host_member import find_switch, member_vmnics

_RETRIED = (vim.fault.ConcurrentAccess,)
_RECONFIGURE = "DistributedVirtualSwitch.reconfigure"
"""descriptionId of ReconfigureDvs_Task as vCenter reports it: the method's vmodl name (pyVmomi's
type info; govmomi's recording of vCenter's task descriptions, simulator/vpx/task_manager.go, which
also lists "dvs.VmwareDistributedVirtualSwitch.reconfigure": the suffix matches both). Not the
simulator's Go name "reconfigureDvs" (issue 51: the wait never fired on a real vCenter)."""


@dataclass(frozen=True)
class MemberChange:
    host_name: str
    vmnics: tuple[str, ...] | None
    """The uplinks the host should have; None: the host leaves the switch."""


Outcome = list[str] | None | VsphereError
"""Per host: its uplinks after the batch (None: not a member), or why it failed alone."""


def _member_spec(dvs: Any, host: Any, change: MemberChange) -> Any | None:
    """The host's part of the reconfigure, or None when it is already as wanted."""
    current = member_vmnics(dvs, host)
    if change.vmnics is None:
        return None if current is None else vim.dvs.HostMember.ConfigSpec(operation="remove", host=host)
    if current is not None and (not current or current == list(change.vmnics)):
        return None  # a member already (adopted as it is when vCenter shows no backing)
    backing = vim.dvs.HostMember.PnicBacking(
        pnicSpec=[vim.dvs.HostMember.PnicSpec(pnicDevice=vmnic) for vmnic in change.vmnics]
    )
    operation = "add" if current is None else "edit"
    return vim.dvs.HostMember.ConfigSpec(operation=operation, host=host, backing=backing)


def _wait_for_running_reconfigure(si: Any, dvs: Any) -> None:
    """A reconfigure of the switch still running (ours, its answer lost; or another client's):
    let it finish, whatever its outcome, before the switch is read and changed again."""
    for task, _ in active_tasks(si, dvs, _RECONFIGURE):
        try:
            wait_for_task(task, object_name=dvs.name, what="the switch's running reconfigure")
        except VsphereError:
            continue  # its fault is not ours to report; the switch is read again below


def apply_member_changes(si: Any, switch_uuid: str, changes: list[MemberChange]) -> dict[str, Outcome]:
    """Apply every change in one reconfigure of the switch (none when nothing is to change)."""
    dvs = find_switch(si, switch_uuid)
    if dvs is None:
        gone = VsphereError(f"distributed switch {switch_uuid} not found", object_name=switch_uuid)
        return {change.host_name: None if change.vmnics is None else gone for change in changes}
    _wait_for_running_reconfigure(si, dvs)
    outcomes: dict[str, Outcome] = {}
    specs: list[Any] = []
    names_by_moid: dict[str, str] = {}
    for change in changes:
        host = find_host_or_none(si, change.host_name)
        if host is None:
            if change.vmnics is None:
                outcomes[change.host_name] = None  # host gone: so is its membership
            else:
                outcomes[change.host_name] = VsphereError(f"host {change.host_name} not found in vCenter")
            continue
        names_by_moid[host._moId] = change.host_name
        spec = _member_spec(dvs, host, change)
        if spec is not None:
            specs.append(spec)
        outcomes[change.host_name] = None if change.vmnics is None else sorted(change.vmnics)
    if specs:
        names = ", ".join(sorted(c.host_name for c in changes if not isinstance(outcomes[c.host_name], VsphereError)))
        # The switch's current configVersion: a concurrent edit is refused instead of overwritten.
        config = vim.dvs.VmwareDistributedVirtualSwitch.ConfigSpec(configVersion=dvs.config.configVersion, host=specs)
        what = f"hosts {names}"
        try:
            wait_for_task(dvs.ReconfigureDvs_Task(spec=config), object_name=dvs.name, what=what)
        except VsphereError as exc:
            text = f"{what} on {dvs.name} failed: {fault_text(exc.fault, names_by_moid)}" if exc.fault else str(exc)
            raise VsphereError(
                text, object_name=dvs.name, fault=exc.fault, transient=isinstance(exc.fault, _RETRIED) or exc.transient
            ) from exc
    return outcomes
