"""Read, without changing anything, what preflight judges: a handful of property-collector rounds
into the plain dataclasses of `components.vcenter.inventory_model`."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from pyVmomi import vim, vmodl

from components.vcenter.inventory_model import (
    DatastoreInfo,
    GpuInfo,
    HostInfo,
    Inventory,
    RdmaDeviceInfo,
    RulesetInfo,
    VmInfo,
)
from components.vcenter.lookups import collect_properties

_HOST_PATHS = [
    "name",
    "parent",
    "runtime.connectionState",
    "runtime.inMaintenanceMode",
    "config.product.version",
    "hardware.memorySize",
    "config.network.pnic",
    "config.network.vswitch",
    "config.network.proxySwitch",
    "config.network.vnic",
    "config.sharedPassthruGpuTypes",
    "config.graphicsConfig",
    "config.graphicsInfo",
    "configManager.firewallSystem",
]
_VM_PATHS = [
    "name",
    "runtime.host",
    "runtime.powerState",
    "config.template",
    "config.memoryAllocation.reservation",
    "config.hardware.device",
    "config.firmware",
    "config.version",
    "guest.ipAddress",
    "guest.net",
    "snapshot",
]


def _snapshot_names(trees: Iterable[Any]) -> Iterator[str]:
    for tree in trees or []:
        yield tree.name
        yield from _snapshot_names(tree.childSnapshotList)


def _paths(items: list[tuple[Any, dict[str, Any]]], root_moid: str) -> set[str]:
    """Slash paths of folders/pools below the object `root_moid`, from (obj, {name, parent})."""
    by_moid = {obj._moId: props for obj, props in items}
    paths = set()
    for obj, _ in items:
        parts: list[str] = []
        moid: str | None = obj._moId
        while moid is not None and moid != root_moid and moid in by_moid:
            parts.append(by_moid[moid]["name"])
            parent = by_moid[moid].get("parent")
            moid = parent._moId if parent is not None else None
        if moid == root_moid and parts:
            paths.add("/".join(reversed(parts)))
    return paths


def _rdma_devices(props: dict[str, Any], pnic_devices: dict[str, str]) -> tuple[RdmaDeviceInfo, ...]:
    devices = []
    for rdma in props.get("config.network.rdmaDevice") or []:
        backing = getattr(rdma, "backing", None)
        # `pairedUplink` is a link to a PhysicalNic: on the wire its key; take the object's
        # device if pyVmomi resolved the link.
        uplink = getattr(backing, "pairedUplink", None)
        if uplink is not None and not isinstance(uplink, str):
            uplink = getattr(uplink, "device", None) or getattr(uplink, "key", None)
        capability = getattr(rdma, "capability", None)
        devices.append(
            RdmaDeviceInfo(
                device=rdma.device,
                paired_uplink=pnic_devices.get(uplink, uplink) if uplink else None,
                roce=bool(getattr(capability, "roceV1Capable", False) or getattr(capability, "roceV2Capable", False)),
            )
        )
    return tuple(devices)


def _host(obj: Any, props: dict[str, Any], cluster_by_moid: dict[str, str]) -> HostInfo:
    pnic_devices = {p.key: p.device for p in props.get("config.network.pnic") or []}
    uplink_of: dict[str, str] = {}
    for vswitch in props.get("config.network.vswitch") or []:
        for key in vswitch.pnic or []:
            uplink_of[pnic_devices.get(key, key)] = f"standard switch {vswitch.name}"
    for proxy in props.get("config.network.proxySwitch") or []:
        for key in proxy.pnic or []:
            uplink_of[pnic_devices.get(key, key)] = f"distributed switch {proxy.dvsName}"
    vmknic_ips = {}
    for vnic in props.get("config.network.vnic") or []:
        address = getattr(getattr(vnic.spec, "ip", None), "ipAddress", None)
        if address:
            vmknic_ips[address] = vnic.device
    parent = props.get("parent")
    graphics = props.get("config.graphicsConfig")
    state = str(props.get("runtime.connectionState") or "unknown")
    gpus = tuple(
        GpuInfo(
            device_name=info.deviceName or "",
            vendor_name=info.vendorName or "",
            pci_id=info.pciId or "",
            memory_mb=int(info.memorySizeInKB or 0) // 1024,
            graphics_type=str(info.graphicsType or ""),
            vm_moids=tuple(vm._moId for vm in info.vm or []),
        )
        for info in props.get("config.graphicsInfo") or []
    )
    return HostInfo(
        name=props["name"],
        moid=obj._moId,
        cluster=cluster_by_moid.get(parent._moId) if parent is not None else None,
        connected=state == "connected",
        connection_state=state,
        maintenance=bool(props.get("runtime.inMaintenanceMode")),
        version=str(props.get("config.product.version") or ""),
        memory_mb=int(props.get("hardware.memorySize") or 0) // 2**20,
        pnics=tuple(pnic_devices.values()),
        link_speed_mb={
            p.device: int(p.linkSpeed.speedMb)
            for p in props.get("config.network.pnic") or []
            if getattr(p, "linkSpeed", None) is not None
        },
        uplink_of=uplink_of,
        vgpu_profiles=tuple(props.get("config.sharedPassthruGpuTypes") or ()),
        graphics_default=getattr(graphics, "hostDefaultGraphicsType", None),
        vmknic_ips=vmknic_ips,
        rdma_devices=_rdma_devices(props, pnic_devices),
        gpus=gpus,
    )


def _vm(obj: Any, props: dict[str, Any], extra_config: dict[str, str]) -> VmInfo:
    ips = {props["guest.ipAddress"]} if props.get("guest.ipAddress") else set()
    for nic in props.get("guest.net") or []:
        ips.update(nic.ipAddress or [])
    host = props.get("runtime.host")
    snapshot = props.get("snapshot")
    devices = props.get("config.hardware.device") or []
    disks = tuple(
        (device.capacityInKB or 0) / 2**20 for device in devices if isinstance(device, vim.vm.device.VirtualDisk)
    )
    vgpus = tuple(
        device.backing.vgpu
        for device in devices
        if isinstance(device, vim.vm.device.VirtualPCIPassthrough)
        and isinstance(device.backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo)
        and device.backing.vgpu
    )
    return VmInfo(
        name=props["name"],
        moid=obj._moId,
        host_moid=host._moId if host is not None else None,
        powered_on=str(props.get("runtime.powerState")) == "poweredOn",
        reservation_mb=int(props.get("config.memoryAllocation.reservation") or 0),
        is_template=bool(props.get("config.template")),
        guest_ips=tuple(sorted(ips)),
        snapshots=tuple(_snapshot_names(snapshot.rootSnapshotList if snapshot is not None else [])),
        disk_gb=disks,
        firmware=props.get("config.firmware"),
        hardware_version=props.get("config.version"),
        vgpu_profiles=vgpus,
        extra_config=extra_config,
    )


RDMA_API = (7, 0)
"""`HostNetworkInfo.rdmaDevice` exists since API 7.0; an older vCenter refuses the path."""


def _api(text: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in text.split("."))


def _extra_config(si: Any, vms: list[Any]) -> dict[str, dict[str, str]]:
    """VM moid -> its `config.extraConfig` as a dict (the last entry of a key wins): one round, for
    the few templates only (a VM's extraConfig can run to hundreds of entries)."""
    if not vms:
        return {}
    pc = vmodl.query.PropertyCollector
    spec = pc.FilterSpec(
        objectSet=[pc.ObjectSpec(obj=vm, skip=False) for vm in vms],
        propSet=[pc.PropertySpec(type=vim.VirtualMachine, pathSet=["config.extraConfig"])],
    )
    found: dict[str, dict[str, str]] = {}
    for content in si.content.propertyCollector.RetrieveContents([spec]):
        extra: dict[str, str] = {}
        for prop in content.propSet or []:
            for option in prop.val or []:
                extra[option.key] = str(option.value or "")
        found[content.obj._moId] = extra
    return found


def _ruleset(ruleset: Any) -> RulesetInfo:
    allowed = ruleset.allowedHosts
    all_ip = allowed is None or bool(allowed.allIp)
    listed = (
        ()
        if allowed is None
        else (
            *(str(a) for a in allowed.ipAddress or []),
            *(f"{n.network}/{n.prefixLength}" for n in allowed.ipNetwork or []),
        )
    )
    return RulesetInfo(key=str(ruleset.key), enabled=bool(ruleset.enabled), all_ip=all_ip, allowed=tuple(listed))


def _firewalls(si: Any, systems: list[Any]) -> dict[str, tuple[RulesetInfo, ...]]:
    """Firewall system moid -> its rulesets (`HostFirewallSystem.firewallInfo`): one round for
    every host. Read from the firewall system, not `HostSystem.config.firewall`: the system is what
    `UpdateRuleset` changes (vSphere API reference, HostFirewallSystem)."""
    if not systems:
        return {}
    pc = vmodl.query.PropertyCollector
    spec = pc.FilterSpec(
        objectSet=[pc.ObjectSpec(obj=system, skip=False) for system in systems],
        propSet=[pc.PropertySpec(type=vim.host.FirewallSystem, pathSet=["firewallInfo"])],
    )
    found: dict[str, tuple[RulesetInfo, ...]] = {}
    for content in si.content.propertyCollector.RetrieveContents([spec]):
        for prop in content.propSet or []:
            if prop.val is not None:
                found[content.obj._moId] = tuple(_ruleset(r) for r in prop.val.ruleset or [])
    return found


def read_inventory(si: Any, datacenter_name: str, templates: Collection[str] = ()) -> Inventory:
    """Read what the checks need, inside the named datacenter (everywhere if it does not exist);
    for the VMs named in `templates`, their extraConfig too (the GPU template checks need it)."""
    content = si.RetrieveContent()
    rdma_reported = _api(str(content.about.apiVersion or "")) >= RDMA_API
    datacenters = collect_properties(si, content.rootFolder, vim.Datacenter, ["name", "vmFolder"])
    match = next(((dc, props) for dc, props in datacenters if props["name"] == datacenter_name), None)
    inv = Inventory(datacenter=datacenter_name if match else None, rdma_reported=rdma_reported)
    inv.datacenters = {props["name"] for _, props in datacenters}
    root = match[0] if match else content.rootFolder

    clusters = collect_properties(si, root, vim.ClusterComputeResource, ["name", "resourcePool"])
    inv.clusters = {props["name"] for _, props in clusters}
    cluster_by_moid = {obj._moId: props["name"] for obj, props in clusters}
    pools = collect_properties(si, root, vim.ResourcePool, ["name", "parent"])
    for _, props in clusters:
        root_pool = props.get("resourcePool")
        if root_pool is not None:
            inv.resource_pools[props["name"]] = _paths(pools, root_pool._moId)

    if match is not None:
        vm_folder = match[1]["vmFolder"]
        folders = collect_properties(si, vm_folder, vim.Folder, ["name", "parent"])
        inv.folders = _paths(folders, vm_folder._moId)

    host_paths = [*_HOST_PATHS, "config.network.rdmaDevice"] if rdma_reported else _HOST_PATHS
    hosts = collect_properties(si, root, vim.HostSystem, host_paths)
    systems = [props["configManager.firewallSystem"] for _, props in hosts if props.get("configManager.firewallSystem")]
    firewalls = _firewalls(si, systems)
    for obj, props in hosts:
        system = props.get("configManager.firewallSystem")
        host = _host(obj, props, cluster_by_moid)
        if system is not None and system._moId in firewalls:
            host = dataclasses.replace(host, firewall=firewalls[system._moId])
        inv.hosts[props["name"]] = host
    vms = collect_properties(si, root, vim.VirtualMachine, _VM_PATHS)
    extra = _extra_config(si, [obj for obj, props in vms if props["name"] in templates])
    for obj, props in vms:
        info = _vm(obj, props, extra.get(obj._moId, {}))
        inv.vms.setdefault(info.name, []).append(info)

    for _, props in collect_properties(si, root, vim.Datastore, ["name", "summary.freeSpace", "summary.accessible"]):
        inv.datastores[props["name"]] = DatastoreInfo(
            name=props["name"],
            free_bytes=int(props.get("summary.freeSpace") or 0),
            accessible=bool(props.get("summary.accessible", True)),
        )
    inv.networks = {props["name"] for _, props in collect_properties(si, root, vim.Network, ["name"])}
    inv.switches = {props["name"] for _, props in collect_properties(si, root, vim.DistributedVirtualSwitch, ["name"])}
    return inv
