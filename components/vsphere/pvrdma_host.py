"""PVRDMA host settings: tag a vmknic for PVRDMA and open the `pvrdma` firewall ruleset.

pulumi-vsphere cannot set the host advanced option `Net.PVRDMAVmknic` nor enable the ESXi
firewall ruleset `pvrdma` (TCP/UDP 28250), so this dynamic provider does both over pyvmomi
(`HostOptionManager.UpdateOptions`, `HostFirewallSystem.EnableRuleset`).

State it keeps: what the host had before (`previous_vmknic`, `previous_ruleset_enabled`), so
`delete` gives the host back as it found it. `read` reports the live values, so `pulumi refresh`
sees a vmknic re-tagged or a ruleset disabled by hand, and the next `up` repairs it.

Re-running after an interrupted create: the desired state always converges. The recorded
"previous" values are best effort in that one case: if a create changed the option and then lost
vCenter before Pulumi saved state, the re-run finds our own value already there and records it
as "previous" (we never clear what we cannot prove we set), so a later delete leaves the option
as it is rather than guessing.
"""

from __future__ import annotations

import re
from typing import Any

import pulumi
from pyVmomi import vim

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.vcenter.errors import VsphereError
from components.vcenter.lookups import find_host, find_host_or_none
from components.vsphere.provider_base import RetryPolicy, VsphereProvider, is_unknown, public_props

OPTION_KEY = "Net.PVRDMAVmknic"
RULESET_KEY = "pvrdma"
_VMKNIC = re.compile(r"^vmk\d+$")


def vmknic_device_from_vnic_id(vnic_id: str) -> str:
    """The vmknic device ("vmk1") from a pulumi-vsphere `Vnic` id ("host-123_vmk1")."""
    _, sep, device = vnic_id.rpartition("_")
    if not sep or not _VMKNIC.match(device):
        raise ValueError(f"not a pulumi-vsphere Vnic id (<hostId>_vmkN): {vnic_id!r}")
    return device


# ---------------------------------------------------------------------------------------------
# pyvmomi operations on one host


def read_option(host: Any) -> str:
    manager = host.configManager.advancedOption
    try:
        values = manager.QueryOptions(OPTION_KEY)
    except vim.fault.InvalidName as exc:
        raise VsphereError(
            f"host {host.name} has no advanced option {OPTION_KEY}; PVRDMA needs ESXi 6.5 or later",
            object_name=host.name,
            fault=exc,
        ) from exc
    for option in values or []:
        if option.key == OPTION_KEY:
            return "" if option.value is None else str(option.value)
    return ""


def write_option(host: Any, value: str) -> None:
    host.configManager.advancedOption.UpdateOptions(changedValue=[vim.option.OptionValue(key=OPTION_KEY, value=value)])


def read_ruleset_enabled(host: Any) -> bool:
    info = host.configManager.firewallSystem.firewallInfo
    for ruleset in info.ruleset if info else []:
        if ruleset.key == RULESET_KEY:
            return bool(ruleset.enabled)
    raise VsphereError(
        f"host {host.name} has no firewall ruleset {RULESET_KEY!r}; PVRDMA needs ESXi 6.5 or later",
        object_name=host.name,
    )


def set_ruleset_enabled(host: Any, enabled: bool) -> None:
    firewall = host.configManager.firewallSystem
    if enabled:
        firewall.EnableRuleset(id=RULESET_KEY)
    else:
        firewall.DisableRuleset(id=RULESET_KEY)


# ---------------------------------------------------------------------------------------------
# Provider


class PvrdmaHostSettingsProvider(VsphereProvider):
    """Dynamic provider for `PvrdmaHostSettings`."""

    def __init__(self, *, retry: RetryPolicy | None = None) -> None:
        super().__init__(retry=retry)

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.CheckResult:
        inputs = public_props(news)
        failures: list[handlers.CheckFailure] = []
        host_name = inputs.get("host_name")
        if not is_unknown(host_name):
            if not isinstance(host_name, str) or not host_name.strip():
                failures.append(handlers.CheckFailure("host_name", "must be a host name"))
            else:
                inputs["host_name"] = host_name.strip()
        device = inputs.get("vmknic_device")
        if not is_unknown(device):
            device = str(device or "").strip()
            if not _VMKNIC.match(device):
                failures.append(
                    handlers.CheckFailure("vmknic_device", f"must be a vmknic device like 'vmk1', got {device!r}")
                )
            inputs["vmknic_device"] = device
        return handlers.CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        # A different host is a different object: create the new one, then restore the old host.
        # The two hosts do not share anything, so create-before-delete is safe.
        replaces = ["host_name"] if olds.get("host_name") != news.get("host_name") else []
        changes = bool(replaces) or (
            olds.get("vmknic_device") != news.get("vmknic_device") or olds.get("ruleset_enabled") is not True
        )
        return handlers.DiffResult(changes=changes, replaces=replaces, delete_before_replace=False)

    def _apply(self, host_name: str, device: str, previous: dict[str, Any] | None) -> dict[str, Any]:
        # The first state seen, kept across retries: a retry after a dropped connection must
        # not record our own half-applied change as "what was there before".
        before: dict[str, Any] = dict(previous or {})

        def op(si: Any) -> dict[str, Any]:
            host = find_host(si, host_name)
            current_option = read_option(host)
            current_ruleset = read_ruleset_enabled(host)
            if not before:
                before.update(previous_vmknic=current_option, previous_ruleset_enabled=current_ruleset)
            # Send only what differs: a re-run against a converged host changes nothing.
            if current_option != device:
                write_option(host, device)
            if not current_ruleset:
                set_ruleset_enabled(host, True)
            return {
                "host_name": host_name,
                "vmknic_device": read_option(host),
                "ruleset_enabled": read_ruleset_enabled(host),
                "previous_vmknic": before["previous_vmknic"],
                "previous_ruleset_enabled": before["previous_ruleset_enabled"],
            }

        return self.run(op, what=f"PVRDMA settings on host {host_name}")

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        host_name = props["host_name"]
        outs = self._apply(host_name, props["vmknic_device"], previous=None)
        return handlers.CreateResult(id_=f"pvrdma:{host_name}", outs=outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        previous = {
            "previous_vmknic": olds.get("previous_vmknic", ""),
            "previous_ruleset_enabled": bool(olds.get("previous_ruleset_enabled", False)),
        }
        outs = self._apply(news["host_name"], news["vmknic_device"], previous=previous)
        return handlers.UpdateResult(outs=outs)

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        host_name = props["host_name"]

        def op(si: Any) -> dict[str, Any] | None:
            host = find_host_or_none(si, host_name)
            if host is None:
                return None
            return {
                "host_name": host_name,
                "vmknic_device": read_option(host),
                "ruleset_enabled": read_ruleset_enabled(host),
                "previous_vmknic": props.get("previous_vmknic", ""),
                "previous_ruleset_enabled": bool(props.get("previous_ruleset_enabled", False)),
            }

        outs = self.run(op, what=f"read PVRDMA settings of host {host_name}")
        if outs is None:
            # Host removed from vCenter: an empty id tells Pulumi the resource is gone.
            return handlers.ReadResult(id_="", outs={})
        return handlers.ReadResult(id_=id_, outs=outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        host_name = props["host_name"]
        ours = props.get("vmknic_device", "")

        def op(si: Any) -> None:
            host = find_host_or_none(si, host_name)
            if host is None:
                return  # nothing left to restore
            # Restore the option only while it still holds our value: if someone re-tagged it
            # since, that choice is theirs.
            if read_option(host) == ours and ours != props.get("previous_vmknic", ""):
                write_option(host, props.get("previous_vmknic", ""))
            previous_enabled = bool(props.get("previous_ruleset_enabled", False))
            if read_ruleset_enabled(host) != previous_enabled:
                set_ruleset_enabled(host, previous_enabled)

        self.run(op, what=f"restore PVRDMA settings of host {host_name}")


class PvrdmaHostSettings(GpuclusterResource, module="vsphere", name="PvrdmaHostSettings"):
    """Tags a vmknic for PVRDMA (`Net.PVRDMAVmknic`) and enables the `pvrdma` firewall ruleset.

    Type token: `gpucluster:vsphere:PvrdmaHostSettings`. Credentials come from the
    stack config (`vsphere:vsphereServer`, `vsphere:user`, `vsphere:password`,
    `vsphere:allowUnverifiedSsl`) or the VSPHERE_* environment, never from inputs.
    """

    host_name: pulumi.Output[str]
    """The ESXi host's name in vCenter."""
    vmknic_device: pulumi.Output[str]
    """The vmknic `Net.PVRDMAVmknic` holds (live value after a refresh)."""
    ruleset_enabled: pulumi.Output[bool]
    """Whether the `pvrdma` firewall ruleset is enabled (live value after a refresh)."""
    previous_vmknic: pulumi.Output[str]
    """`Net.PVRDMAVmknic` before this resource set it; delete restores it."""
    previous_ruleset_enabled: pulumi.Output[bool]
    """Whether the ruleset was enabled before; delete restores it."""

    def __init__(
        self,
        resource_name: str,
        *,
        host_name: pulumi.Input[str],
        vmknic_device: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """
        :param host_name: the ESXi host's name as vCenter shows it.
        :param vmknic_device: the vmknic to tag, e.g. "vmk1"; for a pulumi-vsphere `Vnic` pass
            `vnic.id.apply(vmknic_device_from_vnic_id)`.
        """
        super().__init__(
            resource_name,
            {
                "host_name": host_name,
                "vmknic_device": vmknic_device,
                "ruleset_enabled": None,
                "previous_vmknic": None,
                "previous_ruleset_enabled": None,
            },
            opts,
        )
