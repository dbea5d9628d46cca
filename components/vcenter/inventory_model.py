"""The read-only inventory snapshot preflight judges: plain dataclasses, no pyVmomi.

`components.vcenter.inventory.read_inventory` fills it from vCenter; `stacks.tools.preflight.checks`
judges a stack against it, so every rule is testable without vCenter.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RdmaDeviceInfo:
    """One `HostNetworkInfo.rdmaDevice[]` entry (vSphere API 7.0+, `HostRdmaDevice`)."""

    device: str
    """`vmrdma0`, ..."""
    paired_uplink: str | None
    """The vmnic of `backing.pairedUplink` (`HostRdmaDevicePnicBacking`), None without one."""
    roce: bool
    """`capability.roceV1Capable or capability.roceV2Capable` (`HostRdmaDeviceCapability`)."""


@dataclass(frozen=True)
class RulesetInfo:
    """One `HostFirewallSystem.firewallInfo.ruleset[]` entry (`HostFirewallRuleset`)."""

    key: str
    """`vSphereClient`, `CIMSLP`, `pvrdma`, ..."""
    enabled: bool
    all_ip: bool
    """`allowedHosts.allIp`: the ruleset accepts every source address."""
    allowed: tuple[str, ...] = ()
    """`allowedHosts.ipAddress[]` and `ipNetwork[]` (as `network/prefix`) when not `all_ip`."""


@dataclass(frozen=True)
class GpuInfo:
    """One `HostConfigInfo.graphicsInfo[]` entry (`HostGraphicsInfo`)."""

    device_name: str
    vendor_name: str
    pci_id: str
    memory_mb: int
    graphics_type: str = ""
    """The device's *active* mode now (`graphicsType`: `basic`, `shared`, `direct`, `sharedDirect`).
    It follows the configured default only when the host's xorg service restarts while no VM
    holds the device (components/vsphere/host_graphics/ops.py); vGPU VMs need `sharedDirect`."""
    vm_moids: tuple[str, ...] = ()
    """`vm[]`: the VMs holding the device now (powered on)."""


@dataclass(frozen=True)
class HostInfo:
    name: str
    moid: str
    cluster: str | None
    """Name of the compute cluster the host is in, None for a standalone host."""
    connected: bool
    connection_state: str
    maintenance: bool
    version: str
    memory_mb: int
    pnics: tuple[str, ...]
    uplink_of: dict[str, str]
    """vmnic -> the standard or distributed switch that already uses it as an uplink."""
    vgpu_profiles: tuple[str, ...]
    graphics_default: str | None
    """`graphicsConfig.hostDefaultGraphicsType`: the *configured* type, active after an xorg restart."""
    vmknic_ips: dict[str, str]
    """IPv4 address -> vmknic device."""
    rdma_devices: tuple[RdmaDeviceInfo, ...] = ()
    gpus: tuple[GpuInfo, ...] = ()
    firewall: tuple[RulesetInfo, ...] | None = None
    """The host firewall's rulesets; None when they could not be read (no firewall system)."""
    link_speed_mb: dict[str, int] = field(default_factory=dict)
    """vmnic -> its link speed (`PhysicalNic.linkSpeed.speedMb`); absent while the link is down."""


@dataclass(frozen=True)
class VmInfo:
    name: str
    moid: str
    host_moid: str | None
    powered_on: bool
    reservation_mb: int
    is_template: bool
    guest_ips: tuple[str, ...]
    snapshots: tuple[str, ...]
    """Names of all snapshots in the VM's snapshot tree."""
    disk_gb: tuple[float, ...]
    firmware: str | None = None
    """`config.firmware`: `bios` or `efi`."""
    hardware_version: str | None = None
    """`config.version`, e.g. `vmx-19`."""
    vgpu_profiles: tuple[str, ...] = ()
    """Profiles of the VM's vGPU devices (PCI passthrough with a vmiop backing)."""
    extra_config: dict[str, str] = field(default_factory=dict)
    """`config.extraConfig` (key -> value, the last entry wins); read only for the templates the
    stack names (`read_inventory(templates=...)`), empty for every other VM."""


@dataclass(frozen=True)
class DatastoreInfo:
    name: str
    free_bytes: int
    accessible: bool


@dataclass
class Inventory:
    datacenter: str | None
    """The datacenter's name when found; everything else is read inside it (or everywhere if not)."""
    rdma_reported: bool = True
    """False when vCenter's API predates `HostNetworkInfo.rdmaDevice` (7.0): RDMA pairing unknown."""
    datacenters: set[str] = field(default_factory=set)
    """Every datacenter's name, to list when the stack's is not found."""
    clusters: set[str] = field(default_factory=set)
    hosts: dict[str, HostInfo] = field(default_factory=dict)
    vms: dict[str, list[VmInfo]] = field(default_factory=dict)
    datastores: dict[str, DatastoreInfo] = field(default_factory=dict)
    networks: set[str] = field(default_factory=set)
    switches: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)
    """VM folder paths below the datacenter's VM folder, e.g. `gpu-cluster/dev`."""
    resource_pools: dict[str, set[str]] = field(default_factory=dict)
    """Per cluster: resource pool paths below its root pool, e.g. `gpu-prod` or `a/b`."""
    missing_privileges: dict[tuple[str, str], tuple[str, ...]] | None = None
    """(object kind, name) -> the privileges the account lacks there (`components.vcenter.
    privileges`); None when they were not read: not asked for, or `privileges_note` says why not."""
    privileges_note: str = ""

    def all_vms(self) -> Iterator[VmInfo]:
        for vms in self.vms.values():
            yield from vms
