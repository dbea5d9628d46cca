"""What `python -m stacks preflight` checks, as pure functions over a read-only inventory snapshot.

`read_inventory` reads, in a handful of property-collector rounds and without changing anything,
what the checks need from vCenter into plain dataclasses; `check` then judges a validated
`Environment` against that snapshot. Keeping the judging pure means every rule is testable without
vCenter, and the vCenter part is one function tested against the simulator.

Each finding is `OK`, `WARN` or `BLOCKER` with the stack-file key it is about:
- BLOCKER: `pulumi up` would fail or build something broken (a missing datastore, a host without
  its RDMA vmnic, a vGPU profile the host does not offer, too little memory for the reservations).
- WARN: worth a look, but fine in a common case. Names that exist already are warnings: offline we
  cannot tell this stack's own VMs and switch (a re-run) from someone else's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import Any, Literal

from pyVmomi import vim

from components.vsphere._vsphere import collect_properties
from stacks.environment.loader import ENVIRONMENT_KEY
from stacks.environment.model import Environment, NodeSpec
from stacks.environment.rules import format_path

Level = Literal["OK", "WARN", "BLOCKER"]
KeyPath = tuple[str | int, ...]

LINKED_CLONE_GB = 1.0
"""What a linked clone takes on the datastore at first: its delta disk grows with writes; 1 GB is
a deliberately small estimate (the brief is "linked clones count small")."""
MEMORY_HEADROOM = 0.9
"""Above this share of a host's unreserved memory, the reservations fit but leave ESXi and other
VMs little room: a warning."""
EXISTS_NOTE = "exists already (fine if this stack created it)"


@dataclass(frozen=True)
class Finding:
    level: Level
    key: str
    """Where in the stack file (or `vsphere:*` config) the finding points."""
    message: str

    def render(self) -> str:
        return f"{self.level:<7} {self.key}: {self.message}"


# ---------------------------------------------------------------------------------------------
# The inventory snapshot


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
    vmknic_ips: dict[str, str]
    """IPv4 address -> vmknic device."""


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


@dataclass(frozen=True)
class DatastoreInfo:
    name: str
    free_bytes: int
    accessible: bool


@dataclass
class Inventory:
    datacenter: str | None
    """The datacenter's name when found; everything else is read inside it (or everywhere if not)."""
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

    def all_vms(self) -> Iterator[VmInfo]:
        for vms in self.vms.values():
            yield from vms


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


def read_inventory(si: Any, datacenter_name: str) -> Inventory:
    """Read what the checks need, inside the named datacenter (everywhere if it does not exist)."""
    content = si.RetrieveContent()
    datacenters = collect_properties(si, content.rootFolder, vim.Datacenter, ["name", "vmFolder"])
    match = next(((dc, props) for dc, props in datacenters if props["name"] == datacenter_name), None)
    inv = Inventory(datacenter=datacenter_name if match else None)
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

    host_paths = [
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
    ]
    for obj, props in collect_properties(si, root, vim.HostSystem, host_paths):
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
        inv.hosts[props["name"]] = HostInfo(
            name=props["name"],
            moid=obj._moId,
            cluster=cluster_by_moid.get(parent._moId) if parent is not None else None,
            connected=state == "connected",
            connection_state=state,
            maintenance=bool(props.get("runtime.inMaintenanceMode")),
            version=str(props.get("config.product.version") or ""),
            memory_mb=int(props.get("hardware.memorySize") or 0) // 2**20,
            pnics=tuple(pnic_devices.values()),
            uplink_of=uplink_of,
            vgpu_profiles=tuple(props.get("config.sharedPassthruGpuTypes") or ()),
            graphics_default=getattr(graphics, "hostDefaultGraphicsType", None),
            vmknic_ips=vmknic_ips,
        )

    vm_paths = [
        "name",
        "runtime.host",
        "runtime.powerState",
        "config.template",
        "config.memoryAllocation.reservation",
        "config.hardware.device",
        "guest.ipAddress",
        "guest.net",
        "snapshot",
    ]
    for obj, props in collect_properties(si, root, vim.VirtualMachine, vm_paths):
        ips = {props["guest.ipAddress"]} if props.get("guest.ipAddress") else set()
        for nic in props.get("guest.net") or []:
            ips.update(nic.ipAddress or [])
        host = props.get("runtime.host")
        snapshot = props.get("snapshot")
        disks = tuple(
            (device.capacityInKB or 0) / 2**20
            for device in props.get("config.hardware.device") or []
            if isinstance(device, vim.vm.device.VirtualDisk)
        )
        info = VmInfo(
            name=props["name"],
            moid=obj._moId,
            host_moid=host._moId if host is not None else None,
            powered_on=str(props.get("runtime.powerState")) == "poweredOn",
            reservation_mb=int(props.get("config.memoryAllocation.reservation") or 0),
            is_template=bool(props.get("config.template")),
            guest_ips=tuple(sorted(ips)),
            snapshots=tuple(_snapshot_names(snapshot.rootSnapshotList if snapshot is not None else [])),
            disk_gb=disks,
        )
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


# ---------------------------------------------------------------------------------------------
# The checks


class _Report:
    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def add(self, level: Level, path: KeyPath, message: str) -> None:
        self.findings.append(Finding(level, format_path(ENVIRONMENT_KEY, path), message))

    def ok(self, path: KeyPath, message: str) -> None:
        self.add("OK", path, message)

    def warn(self, path: KeyPath, message: str) -> None:
        self.add("WARN", path, message)

    def blocker(self, path: KeyPath, message: str) -> None:
        self.add("BLOCKER", path, message)


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _our_vm_names(env: Environment) -> dict[str, tuple[str, int, NodeSpec]]:
    """VM name -> (pool key, index, node) for every node the stack builds."""
    names = {}
    for pool_key, pool in (("controlPlane", env.control_plane), ("gpuWorkers", env.gpu_workers)):
        for index, node in enumerate(pool.nodes):
            names[env.vm_name(node)] = (pool_key, index, node)
    return names


def worker_reservation_mb(env: Environment) -> int:
    workers = env.gpu_workers
    return workers.memory_reservation_mb if workers.memory_reservation_mb is not None else workers.memory_mb


def check(env: Environment, inv: Inventory) -> list[Finding]:
    """Every finding for `env` against the inventory snapshot."""
    report = _Report()
    our_vms = _our_vm_names(env)
    _check_placement(env, inv, report)
    _check_template(env, inv, report)
    _check_datastore(env, inv, report, our_vms)
    _check_hosts(env, inv, report)
    _check_memory(env, inv, report, our_vms)
    _check_networks(env, inv, report)
    _check_names_and_addresses(env, inv, report, our_vms)
    return report.findings


def _check_placement(env: Environment, inv: Inventory, report: _Report) -> None:
    vc = env.vcenter
    if inv.datacenter is None:
        report.blocker(("vcenter", "datacenter"), f"datacenter {vc.datacenter!r} not found")
    else:
        report.ok(("vcenter", "datacenter"), f"datacenter {vc.datacenter!r} exists")
    if vc.compute_cluster in inv.clusters:
        report.ok(("vcenter", "computeCluster"), f"cluster {vc.compute_cluster!r} exists")
    else:
        known = ", ".join(sorted(inv.clusters)) or "none"
        report.blocker(("vcenter", "computeCluster"), f"cluster {vc.compute_cluster!r} not found (clusters: {known})")
    if vc.resource_pool is not None:
        pools = inv.resource_pools.get(vc.compute_cluster, set())
        wanted = vc.resource_pool.strip("/")
        if wanted in pools:
            report.ok(("vcenter", "resourcePool"), f"resource pool {wanted!r} exists in {vc.compute_cluster!r}")
        else:
            report.blocker(
                ("vcenter", "resourcePool"),
                f"resource pool {wanted!r} not found in cluster {vc.compute_cluster!r}; create it, or remove "
                "the key to use the cluster's root pool",
            )
    folder = vc.folder.strip("/")
    parent = folder.rsplit("/", 1)[0] if "/" in folder else ""
    if inv.datacenter is None:
        return
    if folder in inv.folders:
        report.warn(("vcenter", "folder"), f"VM folder {folder!r} {EXISTS_NOTE}")
    elif parent and parent not in inv.folders:
        report.blocker(
            ("vcenter", "folder"),
            f"parent folder {parent!r} of {folder!r} not found; the program creates only the last folder, "
            f"so create {parent!r} first",
        )
    else:
        report.ok(
            ("vcenter", "folder"),
            f"VM folder {folder!r} can be created under {repr(parent) if parent else 'the VM root'}",
        )


def _check_template(env: Environment, inv: Inventory, report: _Report) -> None:
    vc = env.vcenter
    matches = inv.vms.get(vc.template, [])
    if not matches:
        report.blocker(("vcenter", "template"), f"template {vc.template!r} not found")
        return
    if len(matches) > 1:
        report.blocker(
            ("vcenter", "template"), f"{len(matches)} VMs are named {vc.template!r}; the name must be unique"
        )
        return
    template = matches[0]
    if template.is_template:
        report.ok(("vcenter", "template"), f"template {vc.template!r} exists")
    else:
        report.warn(
            ("vcenter", "template"),
            f"{vc.template!r} is a VM, not a template; clones of a running VM are not consistent, mark it as a template",
        )
    if not env.vm.linked_clone:
        return
    snapshots = template.snapshots
    if len(snapshots) == 1 and snapshots[0] == vc.template_snapshot:
        report.ok(("vcenter", "templateSnapshot"), f"template has exactly one snapshot, {vc.template_snapshot!r}")
    elif not snapshots:
        report.blocker(
            ("vcenter", "templateSnapshot"),
            f"template {vc.template!r} has no snapshot; linked clones need exactly one, named "
            f"{vc.template_snapshot!r} (take one, or set vm.linkedClone: false)",
        )
    elif len(snapshots) > 1:
        report.blocker(
            ("vcenter", "templateSnapshot"),
            f"template {vc.template!r} has {len(snapshots)} snapshots ({', '.join(snapshots)}); pulumi-vsphere's "
            "linked clone needs exactly one: consolidate them",
        )
    else:
        report.blocker(
            ("vcenter", "templateSnapshot"),
            f"template {vc.template!r}'s only snapshot is {snapshots[0]!r}, not {vc.template_snapshot!r}",
        )
    template_disk = max(template.disk_gb, default=0.0)
    if template_disk >= 1 and env.gpu_workers.disk_gb > template_disk + 0.5:
        report.warn(
            ("gpuWorkers", "diskGb"),
            f"linked clones keep the template's {template_disk:.0f} GB disk; diskGb {env.gpu_workers.disk_gb} is ignored",
        )


def _check_datastore(
    env: Environment, inv: Inventory, report: _Report, our_vms: dict[str, tuple[str, int, NodeSpec]]
) -> None:
    name = env.vcenter.datastore
    store = inv.datastores.get(name)
    if store is None:
        known = ", ".join(sorted(inv.datastores)) or "none"
        report.blocker(("vcenter", "datastore"), f"datastore {name!r} not found (datastores: {known})")
        return
    if not store.accessible:
        report.blocker(("vcenter", "datastore"), f"datastore {name!r} is not accessible")
        return
    need_gb = 0.0
    reservation = worker_reservation_mb(env)
    for vm_name, (pool_key, _, _) in our_vms.items():
        if vm_name in inv.vms:
            continue  # exists already: its space is taken already
        pool = env.control_plane if pool_key == "controlPlane" else env.gpu_workers
        disk = LINKED_CLONE_GB if env.vm.linked_clone else float(pool.disk_gb)
        reserved = reservation if pool_key == "gpuWorkers" else 0
        swap = max(pool.memory_mb - reserved, 0) / 1024  # the .vswp file covers unreserved memory
        need_gb += disk + swap
    free_gb = store.free_bytes / 2**30
    detail = f"{need_gb:.0f} GB needed for the new VMs' disks and swap, {free_gb:.0f} GB free on {name!r}"
    if env.vm.linked_clone:
        detail += f" (linked clones counted at {LINKED_CLONE_GB:.0f} GB each)"
    if need_gb > free_gb:
        report.blocker(("vcenter", "datastore"), detail)
    else:
        report.ok(("vcenter", "datastore"), detail)


def _check_hosts(env: Environment, inv: Inventory, report: _Report) -> None:
    switch_version = _version(env.rdma_network.switch_version)
    for index, spec in enumerate(env.hosts):
        path: KeyPath = ("hosts", index)
        host = inv.hosts.get(spec.name)
        if host is None:
            report.blocker((*path, "name"), f"host {spec.name!r} not found")
            continue
        problems = 0
        if host.cluster != env.vcenter.compute_cluster:
            where = f"cluster {host.cluster!r}" if host.cluster else "no cluster (standalone)"
            report.blocker((*path, "name"), f"host {spec.name!r} is in {where}, not in {env.vcenter.compute_cluster!r}")
            problems += 1
        if not host.connected:
            report.blocker((*path, "name"), f"host {spec.name!r} is {host.connection_state}, not connected")
            problems += 1
        if host.maintenance:
            report.warn((*path, "name"), f"host {spec.name!r} is in maintenance mode; VMs cannot power on there")
        if host.version and _version(host.version) < switch_version:
            report.blocker(
                ("rdmaNetwork", "switchVersion"),
                f"host {spec.name!r} runs ESXi {host.version}, older than the switch version "
                f"{env.rdma_network.switch_version}; lower switchVersion or upgrade the host",
            )
            problems += 1
        for nic_index, vmnic in enumerate(spec.rdma_vmnics):
            nic_path = (*path, "rdmaVmnics", nic_index)
            if vmnic not in host.pnics:
                report.blocker(
                    nic_path, f"host {spec.name!r} has no {vmnic} (physical NICs: {', '.join(host.pnics) or 'none'})"
                )
                problems += 1
            elif (
                vmnic in host.uplink_of
                and host.uplink_of[vmnic] != f"distributed switch {env.rdma_network.switch_name}"
            ):
                report.blocker(
                    nic_path,
                    f"{vmnic} on {spec.name!r} is already an uplink of {host.uplink_of[vmnic]}; free it for the RDMA switch",
                )
                problems += 1
        for profile_index, profile in enumerate(env.gpu_workers.vgpu_profiles):
            if profile not in host.vgpu_profiles:
                offered = ", ".join(host.vgpu_profiles) or "none (no vGPU-capable GPU or no NVIDIA host driver)"
                report.blocker(
                    ("gpuWorkers", "vgpuProfiles", profile_index),
                    f"host {spec.name!r} does not offer vGPU profile {profile!r} (offered: {offered})",
                )
                problems += 1
        if not env.host_graphics.manage and host.graphics_default != "sharedDirect":
            report.blocker(
                ("hostGraphics", "manage"),
                f"host {spec.name!r} default graphics type is {host.graphics_default or 'unknown'!r}, not "
                "'sharedDirect'; set it (vGPU needs it) or set hostGraphics.manage: true",
            )
            problems += 1
        ip = str(spec.vmknic_ip)
        if ip in host.vmknic_ips:
            report.warn((*path, "vmknicIp"), f"{ip} is on {host.vmknic_ips[ip]} of {spec.name!r}: {EXISTS_NOTE}")
        for other in inv.hosts.values():
            if other.name != spec.name and ip in other.vmknic_ips:
                report.blocker((*path, "vmknicIp"), f"{ip} is used by {other.vmknic_ips[ip]} of host {other.name!r}")
                problems += 1
        if not problems:
            report.ok(
                path,
                f"host {spec.name!r}: connected, ESXi {host.version}, {', '.join(spec.rdma_vmnics)} present, "
                f"offers {', '.join(env.gpu_workers.vgpu_profiles)}",
            )


def _check_memory(
    env: Environment, inv: Inventory, report: _Report, our_vms: dict[str, tuple[str, int, NodeSpec]]
) -> None:
    """Each host's unreserved memory against the full reservations of the workers pinned there."""
    reservation = worker_reservation_mb(env)
    pinned: dict[str, list[tuple[int, NodeSpec]]] = defaultdict(list)
    unpinned = 0
    for index, node in enumerate(env.gpu_workers.nodes):
        if env.gpu_workers.placement == "vm-host-rules" and node.host:
            pinned[node.host].append((index, node))
        else:
            unpinned += 1

    def unreserved(host: HostInfo) -> int:
        taken = sum(
            vm.reservation_mb
            for vm in inv.all_vms()
            if vm.host_moid == host.moid and vm.powered_on and vm.name not in our_vms
        )
        return host.memory_mb - taken

    for host_name, nodes in pinned.items():
        host = inv.hosts.get(host_name)
        if host is None:
            continue  # reported by the host checks
        need = reservation * len(nodes)
        free = unreserved(host)
        names = ", ".join(node.name for _, node in nodes)
        path: KeyPath = ("gpuWorkers", "nodes", nodes[0][0], "host")
        text = (
            f"{host_name!r}: workers {names} reserve {need} MB; the host has {host.memory_mb} MB, "
            f"{free} MB not reserved by other powered-on VMs"
        )
        if need > free:
            report.blocker(path, f"not enough memory on {text}")
        elif need > free * MEMORY_HEADROOM:
            report.warn(path, f"tight memory on {text}")
        else:
            report.ok(path, f"memory fits on {text}")
    if unpinned:
        hosts = [inv.hosts[h.name] for h in env.hosts if h.name in inv.hosts]
        free_total = sum(unreserved(h) for h in hosts)
        need = reservation * unpinned
        text = f"{unpinned} unpinned workers reserve {need} MB; the GPU hosts have {free_total} MB unreserved in all"
        fits_one = any(unreserved(h) >= reservation for h in hosts)
        if need > free_total or not fits_one:
            report.blocker(("gpuWorkers", "memoryMb"), f"not enough memory: {text}")
        else:
            report.ok(("gpuWorkers", "memoryMb"), text)


def _check_networks(env: Environment, inv: Inventory, report: _Report) -> None:
    network = env.management_network.network_name
    if network in inv.networks:
        report.ok(("managementNetwork", "networkName"), f"network {network!r} exists")
    else:
        report.blocker(("managementNetwork", "networkName"), f"network {network!r} not found")
    rdma = env.rdma_network
    if rdma.switch_name in inv.switches:
        report.warn(("rdmaNetwork", "switchName"), f"distributed switch {rdma.switch_name!r} {EXISTS_NOTE}")
    else:
        report.ok(("rdmaNetwork", "switchName"), f"distributed switch name {rdma.switch_name!r} is free")
    if rdma.port_group_name in inv.networks:
        report.warn(("rdmaNetwork", "portGroupName"), f"port group {rdma.port_group_name!r} {EXISTS_NOTE}")
    else:
        report.ok(("rdmaNetwork", "portGroupName"), f"port group name {rdma.port_group_name!r} is free")


def _check_names_and_addresses(
    env: Environment, inv: Inventory, report: _Report, our_vms: dict[str, tuple[str, int, NodeSpec]]
) -> None:
    used_by: dict[str, str] = {}
    for vm in inv.all_vms():
        if vm.name in our_vms:
            continue
        for guest_ip in vm.guest_ips:
            used_by.setdefault(guest_ip, vm.name)
    taken = 0
    for vm_name, (pool_key, index, node) in our_vms.items():
        path: KeyPath = (pool_key, "nodes", index)
        if vm_name in inv.vms:
            report.warn((*path, "name"), f"VM {vm_name!r} {EXISTS_NOTE}")
            taken += 1
        addresses: list[tuple[str, IPv4Address]] = [("managementIp", node.management_ip)]
        if node.rdma_ip is not None:
            addresses.append(("rdmaIp", node.rdma_ip))
        for key, address in addresses:
            owner = used_by.get(str(address))
            if owner is not None:
                report.blocker((*path, key), f"{address} is in use by VM {owner!r} (reported by its guest tools)")
                taken += 1
    if not taken:
        report.ok(("vm", "namePrefix"), f"no VM named {env.vm.name_prefix}-* exists and no node address is in use")
