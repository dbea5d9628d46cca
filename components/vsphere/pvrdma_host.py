"""PVRDMA host settings: tag a vmknic for PVRDMA and open the `pvrdma` firewall ruleset to the
RDMA subnet only.

pulumi-vsphere cannot set the host advanced option `Net.PVRDMAVmknic` nor enable the ESXi
firewall ruleset `pvrdma` (TCP/UDP 28250), so this dynamic provider does both over pyvmomi
(`HostOptionManager.UpdateOptions`, `HostFirewallSystem.EnableRuleset`). ESXi ships the ruleset
open to every source (`allowedHosts.allIp`); PVRDMA's peers are the other hosts' vmknics and the
VMs' PVRDMA NICs, all on the RDMA subnet, so the ruleset's allowed hosts are set to that subnet
alone (`HostFirewallSystem.UpdateRuleset` with `allIp` false and one `ipNetwork`: vSphere API
reference, HostFirewallRulesetRulesetSpec / HostFirewallRulesetIpList), before the ruleset is
enabled, so it is never open to every source, not even for a moment.

State it keeps: what the host had before (`previous_vmknic`, `previous_ruleset_enabled`,
`previous_allowed_all_ip`, `previous_allowed_hosts`), so `delete` gives the host back as it found
it. `read` reports the live values, so `pulumi refresh` sees a vmknic re-tagged, a ruleset
disabled or opened to every source by hand, and the next `up` repairs it.

Re-running after an interrupted create: the desired state always converges. The recorded
"previous" values are best effort in that one case: if a create changed the option and then lost
vCenter before Pulumi saved state, the re-run finds our own value already there and records it
as "previous" (we never clear what we cannot prove we set), so a later delete leaves the option
as it is rather than guessing.
"""

from __future__ import annotations

import ipaddress
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


def _ruleset(host: Any) -> Any:
    info = host.configManager.firewallSystem.firewallInfo
    for ruleset in info.ruleset if info else []:
        if ruleset.key == RULESET_KEY:
            return ruleset
    raise VsphereError(
        f"host {host.name} has no firewall ruleset {RULESET_KEY!r}; PVRDMA needs ESXi 6.5 or later",
        object_name=host.name,
    )


def read_ruleset_enabled(host: Any) -> bool:
    return bool(_ruleset(host).enabled)


def read_allowed_hosts(host: Any) -> tuple[bool, list[str]]:
    """The ruleset's allowed hosts: (allIp, addresses then networks as "net/prefix"). A ruleset
    without the property (ESXi before 5.0) allows every source."""
    allowed = _ruleset(host).allowedHosts
    if allowed is None:
        return True, []
    entries = [*(str(a) for a in allowed.ipAddress or [])]
    entries += [f"{n.network}/{n.prefixLength}" for n in allowed.ipNetwork or []]
    return bool(allowed.allIp), entries


def write_allowed_hosts(host: Any, all_ip: bool, entries: list[str]) -> None:
    """Replace the ruleset's allowed hosts (entries: "a.b.c.d" addresses and "net/prefix" networks)."""
    addresses = [e for e in entries if "/" not in e]
    networks = [e.split("/", 1) for e in entries if "/" in e]
    spec = vim.host.Ruleset.RulesetSpec(
        allowedHosts=vim.host.Ruleset.IpList(
            allIp=all_ip,
            ipAddress=addresses,
            ipNetwork=[vim.host.Ruleset.IpNetwork(network=net, prefixLength=int(bits)) for net, bits in networks],
        )
    )
    host.configManager.firewallSystem.UpdateRuleset(id=RULESET_KEY, spec=spec)


def allowed_network_error(value: Any) -> str | None:
    """Why `value` is not an IPv4 subnet in network/prefix form (None when it is)."""
    try:
        network = ipaddress.ip_network(str(value), strict=True)
    except ValueError:
        return f"must be the RDMA subnet as network/prefix, e.g. 192.168.50.0/24, got {value!r}"
    if network.version != 4:
        return f"must be an IPv4 subnet (the RDMA network's vmknics are IPv4), got {value!r}"
    return None


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
        network = inputs.get("allowed_network")
        if not is_unknown(network):
            why = allowed_network_error(network)
            if why is not None:
                failures.append(handlers.CheckFailure("allowed_network", why))
        return handlers.CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        # A different host is a different object: create the new one, then restore the old host.
        # The two hosts do not share anything, so create-before-delete is safe.
        replaces = ["host_name"] if olds.get("host_name") != news.get("host_name") else []
        network = news.get("allowed_network")
        changes = bool(replaces) or (
            olds.get("vmknic_device") != news.get("vmknic_device")
            or olds.get("ruleset_enabled") is not True
            # A state from before the restriction has none of these: the next `up` restricts it.
            or olds.get("allowed_network") != network
            or olds.get("allowed_all_ip") is not False
            or olds.get("allowed_hosts") != [network]
        )
        return handlers.DiffResult(changes=changes, replaces=replaces, delete_before_replace=False)

    def _apply(self, host_name: str, device: str, network: str, previous: dict[str, Any]) -> dict[str, Any]:
        # The first state seen, kept across retries: a retry after a dropped connection must
        # not record our own half-applied change as "what was there before".
        # `previous` holds what an earlier create recorded; a state from before the allowed hosts
        # were managed has no previous allowed hosts, and they are taken from the host now (this
        # stack never changed them).
        before: dict[str, Any] = dict(previous)

        def op(si: Any) -> dict[str, Any]:
            host = find_host(si, host_name)
            current_option = read_option(host)
            current_ruleset = read_ruleset_enabled(host)
            current_all_ip, current_hosts = read_allowed_hosts(host)
            if "previous_vmknic" not in before:
                before.update(previous_vmknic=current_option, previous_ruleset_enabled=current_ruleset)
            if "previous_allowed_all_ip" not in before:
                before.update(previous_allowed_all_ip=current_all_ip, previous_allowed_hosts=current_hosts)
            # Send only what differs: a re-run against a converged host changes nothing. The
            # allowed hosts go first: the ruleset is never enabled while open to every source.
            if current_option != device:
                write_option(host, device)
            if (current_all_ip, current_hosts) != (False, [network]):
                write_allowed_hosts(host, False, [network])
            if not current_ruleset:
                set_ruleset_enabled(host, True)
            all_ip, hosts = read_allowed_hosts(host)
            return {
                "host_name": host_name,
                "vmknic_device": read_option(host),
                "ruleset_enabled": read_ruleset_enabled(host),
                "previous_vmknic": before["previous_vmknic"],
                "previous_ruleset_enabled": before["previous_ruleset_enabled"],
                "allowed_network": network,
                "allowed_all_ip": all_ip,
                "allowed_hosts": hosts,
                "previous_allowed_all_ip": before["previous_allowed_all_ip"],
                "previous_allowed_hosts": before["previous_allowed_hosts"],
            }

        return self.run(op, what=f"PVRDMA settings on host {host_name}")

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        host_name = props["host_name"]
        outs = self._apply(host_name, props["vmknic_device"], props["allowed_network"], previous={})
        return handlers.CreateResult(id_=f"pvrdma:{host_name}", outs=outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        previous: dict[str, Any] = {
            "previous_vmknic": olds.get("previous_vmknic", ""),
            "previous_ruleset_enabled": bool(olds.get("previous_ruleset_enabled", False)),
        }
        if "previous_allowed_all_ip" in olds:
            previous["previous_allowed_all_ip"] = bool(olds["previous_allowed_all_ip"])
            previous["previous_allowed_hosts"] = list(olds.get("previous_allowed_hosts") or [])
        outs = self._apply(news["host_name"], news["vmknic_device"], news["allowed_network"], previous=previous)
        return handlers.UpdateResult(outs=outs)

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        host_name = props["host_name"]

        def op(si: Any) -> dict[str, Any] | None:
            host = find_host_or_none(si, host_name)
            if host is None:
                return None
            all_ip, hosts = read_allowed_hosts(host)
            return {
                **props,
                "host_name": host_name,
                "vmknic_device": read_option(host),
                "ruleset_enabled": read_ruleset_enabled(host),
                "previous_vmknic": props.get("previous_vmknic", ""),
                "previous_ruleset_enabled": bool(props.get("previous_ruleset_enabled", False)),
                "allowed_all_ip": all_ip,
                "allowed_hosts": hosts,
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
            # The allowed hosts likewise: given back only while they are still ours.
            network = props.get("allowed_network")
            if "previous_allowed_all_ip" in props and read_allowed_hosts(host) == (False, [network]):
                previous_allowed = (
                    bool(props["previous_allowed_all_ip"]),
                    list(props.get("previous_allowed_hosts") or []),
                )
                if previous_allowed != (False, [network]):
                    write_allowed_hosts(host, *previous_allowed)

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
    allowed_network: pulumi.Output[str]
    """The RDMA subnet the ruleset is open to (network/prefix)."""
    allowed_all_ip: pulumi.Output[bool]
    """Whether the ruleset allows every source (live value after a refresh; false once applied)."""
    allowed_hosts: pulumi.Output[list[str]]
    """The ruleset's allowed addresses and networks (live value after a refresh)."""
    previous_allowed_all_ip: pulumi.Output[bool]
    """Whether the ruleset allowed every source before (ESXi's default); delete restores it."""
    previous_allowed_hosts: pulumi.Output[list[str]]
    """The ruleset's allowed addresses and networks before; delete restores them."""

    def __init__(
        self,
        resource_name: str,
        *,
        host_name: pulumi.Input[str],
        vmknic_device: pulumi.Input[str],
        allowed_network: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """
        :param host_name: the ESXi host's name as vCenter shows it.
        :param vmknic_device: the vmknic to tag, e.g. "vmk1"; for a pulumi-vsphere `Vnic` pass
            `vnic.id.apply(vmknic_device_from_vnic_id)`.
        :param allowed_network: the RDMA subnet (network/prefix, e.g. "192.168.50.0/24"): the only
            sources the `pvrdma` ruleset lets in.
        """
        super().__init__(
            resource_name,
            {
                "host_name": host_name,
                "vmknic_device": vmknic_device,
                "ruleset_enabled": None,
                "previous_vmknic": None,
                "previous_ruleset_enabled": None,
                "allowed_network": allowed_network,
                "allowed_all_ip": None,
                "allowed_hosts": None,
                "previous_allowed_all_ip": None,
                "previous_allowed_hosts": None,
            },
            opts,
        )
