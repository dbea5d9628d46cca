"""What `stacks init` decides from a read vCenter inventory: pure functions, no vCenter, no files.

`choose` turns the inventory snapshot (`components.vcenter.inventory_model.Inventory`, the one
preflight judges) into `Choices`: the cluster and its GPU hosts, each host's RDMA vmnic, the board
and the vGPU profile that fills each host's GPUs, the datastore, the management network, the
templates. Every reason it refuses (no RDMA-capable NIC, two boards on one host, no GPU host at all)
is collected, so the user sees them all at once (`EstateRefused`). `stacks.tools.init.document`
writes the stack file from the choices.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from components.vcenter.inventory_model import HostInfo, Inventory, VmInfo
from components.vsphere.vgpu.profiles import BOARDS, Board, board_of_gpu
from stacks.environment.fields import DVS_VERSIONS
from stacks.tools.preflight.checks.hardware import MIN_ESXI
from stacks.tools.preflight.checks.report import version_tuple

NEWEST_HARDWARE_VERSION = 21
"""The newest hardware version init picks (ESXi 8.0 U2+); 22 needs ESXi 9, which few sites run yet."""


class EstateRefused(Exception):
    """What in the estate cannot carry the cluster: one line per problem, each with the fix."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class HostChoice:
    name: str
    vmnic: str
    why_vmnic: str
    """Which NICs were candidates and why this one (the comment next to `rdmaVmnics`)."""
    gpus: int
    board: Board
    memory_mb: int
    esxi: str


@dataclass(frozen=True)
class TemplateChoice:
    name: str
    found: bool
    """False: not in vCenter; the stack names what templates/README.md builds."""
    snapshot: str | None = None


@dataclass(frozen=True)
class Choices:
    datacenter: str
    cluster: str
    hosts: tuple[HostChoice, ...]
    board: Board
    profile: str
    gpus_per_worker: int
    datastore: str
    datastore_free_gb: int
    datastores_other: tuple[str, ...]
    network: str
    networks_other: tuple[str, ...]
    template: TemplateChoice
    gpu_template: TemplateChoice
    hardware_version: int
    switch_version: str
    left_out: tuple[str, ...] = field(default_factory=tuple)
    """Hosts of the cluster not used, each with why (a comment at the top of the file)."""


def _nvidia_boards(host: HostInfo) -> list[tuple[str, Board | None]]:
    return [
        (gpu.device_name, board_of_gpu(gpu.device_name, gpu.memory_mb))
        for gpu in host.gpus
        if "nvidia" in (gpu.vendor_name + " " + gpu.device_name).lower()
    ]


def rdma_vmnic(host: HostInfo) -> tuple[str | None, str]:
    """The vmnic to carry PVRDMA on `host` and why; (None, why not) when none can.

    A candidate has a RoCE-capable RDMA device paired with it (`HostRdmaDevice.backing.pairedUplink`,
    `capability.roceV2Capable`: a ConnectX, not a plain NIC or an iWARP one) and is no uplink of
    another switch yet. Of several, the fastest link (`PhysicalNic.linkSpeed.speedMb`), then the
    lowest number."""
    paired = {d.paired_uplink: d for d in host.rdma_devices if d.paired_uplink}
    roce = [nic for nic in host.pnics if nic in paired and paired[nic].roce]
    if not roce:
        iwarp = [nic for nic in host.pnics if nic in paired]
        detail = f" ({', '.join(iwarp)}: RDMA without RoCE)" if iwarp else ""
        return None, (
            f"host {host.name!r} has no RDMA-capable (RoCE) NIC{detail}: PVRDMA needs a ConnectX-class NIC "
            "with its RDMA driver (nmlx5_rdma); install one, or leave the host out with --hosts"
        )
    free = [nic for nic in roce if nic not in host.uplink_of]
    if not free:
        used = ", ".join(f"{nic} ({host.uplink_of[nic]})" for nic in roce)
        return None, f"host {host.name!r}: every RoCE NIC is already an uplink of another switch: {used}; free one"

    def speed(nic: str) -> int:
        return host.link_speed_mb.get(nic, 0)

    best = sorted(free, key=lambda nic: (-speed(nic), int(nic.removeprefix("vmnic") or 0)))[0]
    gbits = f"{speed(best) // 1000} Gb/s" if speed(best) else "link down"
    others = [nic for nic in free if nic != best]
    why = f"{best}: RoCE-capable ({paired[best].device}), {gbits}, no switch uses it"
    if others:
        why += f"; also possible: {', '.join(others)}"
    return best, why


def _pick_cluster(inv: Inventory, wanted: str | None, problems: list[str]) -> str | None:
    gpu_clusters = Counter(h.cluster for h in inv.hosts.values() if h.cluster and _nvidia_boards(h))
    if wanted is not None:
        if wanted not in inv.clusters:
            problems.append(f"--cluster: no cluster {wanted!r} (clusters: {', '.join(sorted(inv.clusters)) or 'none'})")
            return None
        return wanted
    if not gpu_clusters:
        problems.append(
            "no host with an NVIDIA GPU was found in any cluster "
            f"(hosts: {', '.join(sorted(inv.hosts)) or 'none'}); is the NVIDIA vGPU Manager installed on the hosts?"
        )
        return None
    if len(gpu_clusters) > 1:
        listed = ", ".join(f"{c} ({n} GPU hosts)" for c, n in sorted(gpu_clusters.items()))
        problems.append(f"several clusters have GPU hosts: {listed}; name one with --cluster")
        return None
    return next(iter(gpu_clusters))


def _pick_template(inv: Inventory, *, with_vgpu: str | None, default: str) -> TemplateChoice:
    templates = [vm for vm in inv.all_vms() if vm.is_template]

    def fits(vm: VmInfo) -> bool:
        return (with_vgpu in vm.vgpu_profiles) if with_vgpu else not vm.vgpu_profiles

    # Names of this project's templates first (templates/README.md: rocky9-k8s-...), then any.
    found = sorted((vm for vm in templates if fits(vm)), key=lambda vm: ("k8s" not in vm.name, vm.name))
    if not found:
        return TemplateChoice(name=default, found=False)
    vm = found[0]
    snapshot = "base" if "base" in vm.snapshots else (vm.snapshots[0] if vm.snapshots else None)
    return TemplateChoice(name=vm.name, found=True, snapshot=snapshot)


def _hardware_version(oldest_esxi: tuple[int, ...]) -> int:
    runs = [v for v, (minimum, _) in MIN_ESXI.items() if minimum <= oldest_esxi and v <= NEWEST_HARDWARE_VERSION]
    return max(runs) if runs else 19


def _switch_version(oldest_esxi: tuple[int, ...]) -> str:
    fitting = [v for v in DVS_VERSIONS if version_tuple(v) <= oldest_esxi]
    return fitting[-1] if fitting else DVS_VERSIONS[0]


def choose(
    inv: Inventory,
    *,
    cluster: str | None = None,
    hosts: list[str] | None = None,
    datastore: str | None = None,
    network: str | None = None,
) -> Choices:
    """The choices for a stack on this estate; EstateRefused with every problem when it cannot carry one."""
    problems: list[str] = []
    if inv.datacenter is None:
        problems.append(f"no datacenter chosen (datacenters: {', '.join(sorted(inv.datacenters)) or 'none'})")
        raise EstateRefused(problems)
    if not inv.rdma_reported:
        problems.append(
            "this vCenter's API predates vSphere 7.0, so it does not report which NICs can do RDMA "
            "(HostNetworkInfo.rdmaDevice); PVRDMA on this project needs ESXi and vCenter 7.0 or later"
        )
        raise EstateRefused(problems)
    cluster_name = _pick_cluster(inv, cluster, problems)
    if cluster_name is None:
        raise EstateRefused(problems)
    members = sorted((h for h in inv.hosts.values() if h.cluster == cluster_name), key=lambda h: h.name)
    if hosts:
        unknown = [name for name in hosts if name not in {h.name for h in members}]
        if unknown:
            problems.append(
                f"--hosts: {', '.join(unknown)} not in cluster {cluster_name!r} "
                f"(its hosts: {', '.join(h.name for h in members) or 'none'})"
            )
        members = [h for h in members if h.name in hosts]
    left_out: list[str] = []
    candidates: list[tuple[HostInfo, Board, int]] = []
    for host in members:
        boards = _nvidia_boards(host)
        if not boards:
            left_out.append(f"{host.name}: no NVIDIA GPU")
            continue
        unknown_boards = sorted({device for device, board in boards if board is None})
        kinds = {board.key for _, board in boards if board is not None}
        if unknown_boards:
            problems.append(
                f"host {host.name!r}: GPU {', '.join(unknown_boards)} is not a board whose vGPU types this project "
                f"knows (components/vsphere/vgpu/profiles.py BOARDS: {', '.join(sorted(BOARDS))})"
            )
            continue
        if len(kinds) > 1:
            problems.append(
                f"host {host.name!r} has GPUs of several boards ({', '.join(sorted(kinds))}); one worker's vGPUs come "
                "from one board, and a worker per host cannot use them all: move the GPUs so each host has one board"
            )
            continue
        board = next(board for _, board in boards if board is not None)
        if not host.connected or host.maintenance:
            left_out.append(f"{host.name}: {'in maintenance mode' if host.maintenance else host.connection_state}")
            continue
        candidates.append((host, board, len(boards)))
    if not candidates:
        if not problems:
            problems.append(f"cluster {cluster_name!r} has no usable GPU host ({'; '.join(left_out) or 'no hosts'})")
        raise EstateRefused(problems)
    # One board for the stack (a worker's vGPUs and the GPU template are of one board): the board
    # most hosts have; hosts of another board are left out, named.
    counts = Counter(board.key for _, board, _ in candidates)
    board = BOARDS[sorted(counts, key=lambda key: (-counts[key], key))[0]]
    profile = board.full_gpu_profile()
    chosen: list[HostChoice] = []
    for host, host_board, gpus in candidates:
        if host_board.key != board.key:
            left_out.append(f"{host.name}: {host_board.product}, the stack's workers use {board.product}")
            continue
        if profile not in host.vgpu_profiles:
            offered = ", ".join(host.vgpu_profiles) or "none (is the NVIDIA vGPU Manager installed?)"
            problems.append(f"host {host.name!r} does not offer {profile!r} (offered: {offered})")
            continue
        vmnic, why = rdma_vmnic(host)
        if vmnic is None:
            problems.append(why)
            continue
        chosen.append(
            HostChoice(
                name=host.name,
                vmnic=vmnic,
                why_vmnic=why,
                gpus=gpus,
                board=host_board,
                memory_mb=host.memory_mb,
                esxi=host.version,
            )
        )
    if problems:
        raise EstateRefused(problems)
    gpus_per_worker = min(h.gpus for h in chosen)

    usable = sorted((d for d in inv.datastores.values() if d.accessible), key=lambda d: (-d.free_bytes, d.name))
    if datastore is not None:
        picked = [d for d in usable if d.name == datastore]
        if not picked:
            problems.append(
                f"--datastore: no accessible datastore {datastore!r} "
                f"(accessible: {', '.join(d.name for d in usable) or 'none'})"
            )
    else:
        picked = usable[:1]
        if not picked:
            problems.append("no accessible datastore in the datacenter")
    networks = sorted(inv.networks - inv.switches)
    if network is not None and network not in networks:
        problems.append(f"--network: no network {network!r} (networks: {', '.join(networks) or 'none'})")
    if not networks:
        problems.append("no network (port group) in the datacenter for the VMs' management NIC")
    if problems:
        raise EstateRefused(problems)
    chosen_network = network or ("VM Network" if "VM Network" in networks else networks[0])
    oldest = min(version_tuple(h.esxi or "0") for h in chosen)
    return Choices(
        datacenter=inv.datacenter,
        cluster=cluster_name,
        hosts=tuple(chosen),
        board=board,
        profile=profile,
        gpus_per_worker=gpus_per_worker,
        datastore=picked[0].name,
        datastore_free_gb=picked[0].free_bytes // 2**30,
        datastores_other=tuple(d.name for d in usable if d.name != picked[0].name),
        network=chosen_network,
        networks_other=tuple(n for n in networks if n != chosen_network),
        template=_pick_template(inv, with_vgpu=None, default="rocky9-k8s-gpu-template"),
        gpu_template=_pick_template(inv, with_vgpu=profile, default=f"rocky9-k8s-vgpu-{profile.split('_', 1)[1]}"),
        hardware_version=_hardware_version(oldest),
        switch_version=_switch_version(oldest),
        left_out=tuple(left_out),
    )
