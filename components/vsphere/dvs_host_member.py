"""One ESXi host's membership of the RDMA distributed switch, as its own resource.

Why not the switch's own `hosts` list: removing a host from an environment then *updates* the
switch, and Pulumi runs updates before deletes, so vCenter is asked to drop the host while its
vmknic and its worker VM's PVRDMA port are still on the switch, which it refuses
(`ResourceInUse`, thrown by `ReconfigureDvs_Task`; vSphere Networking, "Remove Hosts from a
vSphere Distributed Switch": migrate or remove the host's VMkernel adapters and VM network
adapters first). As a resource of its own that the host's vmknic and VMs depend on, the
membership is a *delete*, and Pulumi deletes dependents first: the VM, the PVRDMA settings and
the vmknic go, then the host leaves the switch.

The switch keeps `ignore_changes=["hosts"]` (see `rdma_fabric`), so its own diff never adds or
removes members behind this resource's back. Members found already on the switch (stacks created
before this resource existed) are adopted as they are.
"""

from __future__ import annotations

import threading
from typing import Any

import pulumi
from pyVmomi import vim, vmodl

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.vcenter.errors import VsphereError
from components.vcenter.faults import fault_text
from components.vcenter.lookups import find_host, find_host_or_none
from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy, VsphereProvider, is_unknown, public_props

# vCenter runs one reconfigure of a switch at a time and fails another that arrives meanwhile
# with DvsOperationBulkFault (community.vmware issue 1989: parallel host adds to one switch fail
# so; the workaround is one at a time). The engine creates the members of one switch at once,
# each with a provider object of its own but in one provider process (the Python dynamic
# provider serves them from several threads), so the lock is per switch and per process, not
# per provider object. Conflicts with other processes (another stack, an admin) remain, and are
# retried (`_CONFLICTS`).
_switch_locks: dict[str, threading.Lock] = {}
_switch_locks_guard = threading.Lock()


def switch_lock(uuid: str) -> threading.Lock:
    """The lock that serialises this process's member changes of the switch with this UUID."""
    with _switch_locks_guard:
        return _switch_locks.setdefault(uuid, threading.Lock())


#: Refusals of a switch edit that a later attempt can get past: another reconfigure of the
#: switch was running (DvsOperationBulkFault, vcsim/dvs_reconfigure.go), or the spec carried a
#: configVersion another client's change has made stale (ConcurrentAccess; pyvmomi issue 538).
#: The retry reads the switch, its members and its configVersion again. DvsOperationBulkFault
#: also wraps lasting per-host faults (a vmnic in use elsewhere); the retries are bounded
#: (`RetryPolicy`) and the last error keeps vCenter's text.
_CONFLICTS: tuple[type[BaseException], ...] = (vim.fault.ConcurrentAccess, vim.fault.DvsOperationBulkFault)


def find_switch(si: Any, uuid: str) -> Any | None:
    """The distributed switch with this UUID (pulumi-vsphere's id of a switch), or None."""
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.DistributedVirtualSwitch], True)
    try:
        return next((dvs for dvs in view.view if dvs.uuid == uuid), None)
    finally:
        view.Destroy()


def member_vmnics(dvs: Any, host: Any) -> list[str] | None:
    """The host's uplink vmnics on the switch; None when the host is not a member."""
    if host not in list(dvs.summary.hostMember or []):
        return None
    for member in getattr(dvs.config, "host", None) or []:
        if member.config.host == host and member.config.backing is not None:
            return sorted(spec.pnicDevice for spec in member.config.backing.pnicSpec or [])
    return []  # a member whose backing vCenter does not show


def reconfigure_member(dvs: Any, host: Any, operation: str, vmnics: list[str], *, host_name: str) -> None:
    backing = vim.dvs.HostMember.PnicBacking(
        pnicSpec=[vim.dvs.HostMember.PnicSpec(pnicDevice=vmnic) for vmnic in vmnics]
    )
    member = vim.dvs.HostMember.ConfigSpec(operation=operation, host=host)
    if operation != "remove":
        member.backing = backing
    # The switch's current configVersion: a concurrent edit is refused instead of overwritten.
    spec = vim.dvs.VmwareDistributedVirtualSwitch.ConfigSpec(configVersion=dvs.config.configVersion, host=[member])
    what = f"{operation} host {host_name}"
    try:
        # vCenter may refuse the call itself (pyVmomi raises the SOAP fault; no task is made) or
        # fail the task it returned: a conflict is transient either way.
        task = dvs.ReconfigureDvs_Task(spec=spec)
    except _CONFLICTS as fault:
        raise VsphereError(
            f"{what} on {dvs.name} refused: {fault_text(fault)}", object_name=dvs.name, fault=fault, transient=True
        ) from fault
    except vmodl.MethodFault as fault:
        raise VsphereError(
            f"{what} on {dvs.name} refused: {fault_text(fault)}", object_name=dvs.name, fault=fault
        ) from fault
    try:
        wait_for_task(task, object_name=dvs.name, what=what)
    except VsphereError as exc:
        if isinstance(exc.fault, _CONFLICTS):
            raise VsphereError(str(exc), object_name=dvs.name, fault=exc.fault, transient=True) from exc
        raise


class DvsHostMemberProvider(VsphereProvider):
    """Dynamic provider for `DvsHostMember`."""

    def __init__(self, *, retry: RetryPolicy | None = None) -> None:
        super().__init__(retry=retry)

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.CheckResult:
        inputs = public_props(news)
        failures: list[handlers.CheckFailure] = []
        for key in ("host_name", "switch_uuid"):
            value = inputs.get(key)
            if not is_unknown(value) and (not isinstance(value, str) or not value.strip()):
                failures.append(handlers.CheckFailure(key, "must be a non-empty string"))
        vmnics = inputs.get("vmnics")
        if not is_unknown(vmnics):
            if not isinstance(vmnics, list) or not vmnics or not all(isinstance(v, str) and v for v in vmnics):
                failures.append(handlers.CheckFailure("vmnics", "must be a list of vmnic names"))
            else:
                inputs["vmnics"] = sorted(vmnics)
        return handlers.CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        # Another host is another membership: the new one is added first, the old one removed at
        # the end, after whatever used it.
        #
        # Another switch is refused. The host's vmknic and its VMs' ports are on the old switch,
        # and they depend on this resource by `depends_on` only, not through an input property.
        # The engine deletes a dependent ahead of a delete-before-replace only when one of the
        # dependent's inputs comes from the replaced resource (pulumi/pulumi
        # pkg/resource/deploy/step_generator.go, `calculateDependentReplacements`: a plain
        # `dependsOn` does not count), so a replacement would ask vCenter to drop the host from
        # the old switch while they still use it, which it refuses (`ResourceInUse`;
        # vcsim/dvs_hosts.go). Create-first is no way out either: the host's vmnic backs one
        # switch at a time (each physical adapter is paired with one uplink port: vSphere CLI
        # Concepts and Examples 6.7, "Networking Using vSphere Distributed Switches"), so the new
        # switch cannot claim it while the old one holds it. An unknown switch (a switch being
        # replaced, during a preview) is refused too: it becomes another switch.
        old_uuid, new_uuid = olds.get("switch_uuid"), news.get("switch_uuid")
        if is_unknown(new_uuid) or old_uuid != new_uuid:
            host_name = olds.get("host_name")
            # Which case this is cannot be told from here for sure: an unknown id during a preview
            # is the switch being replaced (or one not created yet); a known other id is the
            # replacement already made, or another switch. Both are said, the likelier first.
            replaced = (
                "the switch itself is being replaced (terraform-provider-vsphere replaces a distributed switch "
                "on a new datacenter_id or folder: `vcenter.datacenter`): every host and every GPU worker on it "
                "use the old switch, so all of them must go first: revert that change, or remove every GPU worker "
                "(`gpuWorkers.nodes`) and every host (`hosts`) from the stack, `pulumi up`, change the switch, "
                "then add them back"
            )
            moved = (
                f"moving host {host_name} from switch {old_uuid} to another switch in one update is impossible "
                "because its vmknic and VMs use the old switch; remove the host (and its workers) from the "
                "stack, `pulumi up`, then add it back"
            )
            raise ValueError(
                f"{replaced}. Or, if only this host moves: {moved}"
                if is_unknown(new_uuid)
                else f"{moved}. If the switch itself is replaced, {replaced}"
            )
        replaces = ["host_name"] if olds.get("host_name") != news.get("host_name") else []
        changes = bool(replaces) or sorted(olds.get("vmnics") or []) != sorted(news.get("vmnics") or [])
        return handlers.DiffResult(changes=changes, replaces=replaces, delete_before_replace=False)

    def _apply(self, props: dict[str, Any]) -> dict[str, Any]:
        host_name, uuid, vmnics = props["host_name"], props["switch_uuid"], sorted(props["vmnics"])

        def op(si: Any) -> dict[str, Any]:
            dvs = find_switch(si, uuid)
            if dvs is None:
                raise VsphereError(f"distributed switch {uuid} not found", object_name=uuid)
            host = find_host(si, host_name)
            current = member_vmnics(dvs, host)
            if current is None:
                reconfigure_member(dvs, host, "add", vmnics, host_name=host_name)
            elif current and current != vmnics:
                reconfigure_member(dvs, host, "edit", vmnics, host_name=host_name)
            return {"host_name": host_name, "switch_uuid": uuid, "vmnics": vmnics}

        with switch_lock(uuid):
            return self.run(op, what=f"membership of host {host_name} in switch {uuid}")

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        outs = self._apply(props)
        return handlers.CreateResult(id_=f"{props['switch_uuid']}:{props['host_name']}", outs=outs)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        return handlers.UpdateResult(outs=self._apply(news))

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        host_name, uuid = props["host_name"], props["switch_uuid"]

        def op(si: Any) -> list[str] | None:
            dvs = find_switch(si, uuid)
            host = find_host_or_none(si, host_name)
            return None if dvs is None or host is None else member_vmnics(dvs, host)

        vmnics = self.run(op, what=f"read membership of host {host_name}")
        if vmnics is None:
            return handlers.ReadResult(id_="", outs={})  # not a member (any more)
        return handlers.ReadResult(id_=id_, outs={**public_props(props), "vmnics": vmnics or props["vmnics"]})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        host_name, uuid = props["host_name"], props["switch_uuid"]

        def op(si: Any) -> None:
            dvs = find_switch(si, uuid)
            host = find_host_or_none(si, host_name)
            if dvs is None or host is None or member_vmnics(dvs, host) is None:
                return
            reconfigure_member(dvs, host, "remove", [], host_name=host_name)

        with switch_lock(uuid):
            self.run(op, what=f"remove host {host_name} from switch {uuid}")


class DvsHostMember(GpuclusterResource, module="vsphere", name="DvsHostMember"):
    """One ESXi host as a member of a distributed switch, with its uplink vmnics.

    Type token: `gpucluster:vsphere:DvsHostMember`. The host's vmknic and the VMs
    placed on the host depend on it, so removing the host deletes them first and takes the host
    off the switch last, which is the only order vCenter accepts.
    """

    host_name: pulumi.Output[str]
    """The ESXi host's name in vCenter."""
    switch_uuid: pulumi.Output[str]
    """UUID of the distributed switch (pulumi-vsphere's `DistributedVirtualSwitch.id`)."""
    vmnics: pulumi.Output[list[str]]
    """The host's physical NICs that back the switch's uplinks."""

    def __init__(
        self,
        resource_name: str,
        *,
        host_name: pulumi.Input[str],
        switch_uuid: pulumi.Input[str],
        vmnics: pulumi.Input[list[str]],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """
        :param host_name: the ESXi host's name as vCenter shows it.
        :param switch_uuid: the switch's UUID (`DistributedVirtualSwitch.id`).
        :param vmnics: the vmnics that become the host's uplinks (PVRDMA: exactly one).
        """
        super().__init__(
            resource_name,
            {"host_name": host_name, "switch_uuid": switch_uuid, "vmnics": vmnics},
            opts,
        )
