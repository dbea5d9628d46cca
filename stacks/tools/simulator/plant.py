"""What `python -m stacks.tools.simulator` derives from a stack and plants in the simulator.

Two halves, both driven by the validated `Environment` only, so the simulator follows the stack file:

- `inventory_of` (pure): the JSON that `build/vcsim-harness -stack-inventory` reads to name its
  datacenter, cluster, datastore, network and hosts (vcsim/stack_inventory.go), with host facts a
  vSphere API cannot set (ESXi version, memory);
- `plant` (pyVmomi, over the API like any client): the parent of `vcenter.folder` and the two
  templates as templates/README.md builds them: the control plane's without a vGPU, the GPU
  workers' with one vGPU per `gpuWorkers.vgpuProfiles` and all memory reserved, each with the one
  snapshot `vcenter.templateSnapshot` that linked clones need.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from components.vsphere.gpu_template import TOOLKIT_VERSION_KEY
from components.vsphere.vgpu.profiles import BOARDS, needs_64bit_mmio, parse_profile, vgpu_extra_config
from stacks import PROJECT_DIR
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.hardware import MIN_ESXI
from stacks.tools.preflight.checks.report import version_tuple

SIM_ESXI_VERSION = "8.0.3"
"""What every simulated host runs unless the stack needs newer: a current release, which runs every
hardware version up to 21 and a distributed switch up to 8.0.3."""
SIM_HOST_MEMORY_MB = 256 * 1024
"""A GPU host's memory; the model's own 4 GB would not hold one worker's reservation."""
GUEST_ID = "rockylinux_64Guest"
"""vSphere's guest id for Rocky Linux (vSphere 8.0 guest OS list); the simulator stores any id."""


def esxi_version(env: Environment) -> str:
    """The newest of SIM_ESXI_VERSION, the switch's version and what the hardware version needs."""
    candidates = [SIM_ESXI_VERSION, env.rdma_network.switch_version]
    if env.vm.hardware_version in MIN_ESXI:
        candidates.append(".".join(str(p) for p in MIN_ESXI[env.vm.hardware_version][0]))
    return max(candidates, key=version_tuple)


MIN_DATASTORE_FREE_GB = 10 * 1024
"""The least free space the simulated datastore reports: a small GPU cluster's vSAN."""


def datastore_free_gb(env: Environment) -> int:
    """What the simulated datastore reports free: room for every VM's full disk and swap and the
    templates, four times over, at least MIN_DATASTORE_FREE_GB. vcsim's own figure is the free space
    of the disk it runs on less every planted disk in full (thin or not), so a stack with 200 GB disks
    read as short of space on a laptop (issue 54: `-173 GB free`); a real datastore of the site's
    size is what the stack names (DatastoreSummary.freeSpace, vSphere API reference)."""
    pools = [(env.control_plane, len(env.control_plane.nodes)), (env.gpu_workers, len(env.gpu_workers.nodes))]
    need = sum(count * (pool.disk_gb + pool.memory_mb // 1024) for pool, count in pools)
    need += 2 * max(env.control_plane.disk_gb, env.gpu_workers.disk_gb)  # the two templates
    return max(MIN_DATASTORE_FREE_GB, 4 * need)


def host_gpus(env: Environment) -> list[dict[str, Any]]:
    """Each host's GPUs as the stack's workers need them: one physical GPU of the profile's board per
    vGPU of a worker (`HostGraphicsInfo.deviceName`, `memorySizeInKB`); none listed (the harness's one
    Tesla T4) for T4 profiles and boards missing from the table."""
    board = BOARDS.get(parse_profile(env.gpu_workers.vgpu_profiles[0]).board)
    if board is None or board.key == "t4":
        return []
    return [{"deviceName": board.product, "memoryMb": board.framebuffer_gb * 1024}] * len(env.gpu_workers.vgpu_profiles)


def host_memory_mb(env: Environment) -> int:
    """A GPU host's memory: SIM_HOST_MEMORY_MB, or twice what the workers pinned to one host reserve
    when that is more (a site sizes its hosts for its workers; a fixed figure made preflight report
    a stack with large workers short of memory on the simulator)."""
    per_host = Counter(node.host for node in env.gpu_workers.nodes if node.host)
    workers = max(per_host.values(), default=1)
    return max(SIM_HOST_MEMORY_MB, 2 * workers * env.gpu_workers.memory_mb)


def inventory_of(env: Environment) -> dict[str, Any]:
    """The `-stack-inventory` JSON for `env` : its names, hosts in file order, each with the GPUs its
    worker needs, and a datastore with room for the stack."""
    version = esxi_version(env)
    gpus = host_gpus(env)
    memory = host_memory_mb(env)
    return {
        "datacenter": env.vcenter.datacenter,
        "cluster": env.vcenter.compute_cluster,
        "datastore": env.vcenter.datastore,
        "datastoreFreeGb": datastore_free_gb(env),
        "network": env.management_network.network_name,
        "hosts": [
            {"name": h.name, "esxiVersion": version, "memoryMb": memory, **({"gpus": gpus} if gpus else {})}
            for h in env.hosts
        ],
    }


def harness_flags(env: Environment, inventory_file: str) -> list[str]:
    """The harness flags besides the port: the inventory, and the hosts as a ready GPU host has them."""
    vmnics = sorted({vmnic for host in env.hosts for vmnic in host.rdma_vmnics})
    return [
        "-stack-inventory",
        inventory_file,
        # vCenter 7.0 U3: reports HostNetworkInfo.rdmaDevice, so the RDMA pairing is checked (vcsim/preflight.go).
        "-api-version",
        "7.0.3.0",
        # The stack's RDMA uplinks, each paired with a RoCE device (ConnectX-style).
        "-pnics",
        ",".join(vmnics),
        # The vGPU profiles the stack asks for, on hosts whose GPU already runs Shared Direct.
        "-vgpu-profiles",
        ",".join(sorted(set(env.gpu_workers.vgpu_profiles))),
        "-graphics-default",
        "sharedDirect",
    ]


def _find(si: Any, vimtype: Any, name: str) -> Any:
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vimtype], True)
    try:
        return next(obj for obj in view.view if obj.name == name)
    finally:
        view.Destroy()


def _folder(parent: Any, path: str) -> Any:
    """The folder `path` below `parent`, created where missing."""
    from pyVmomi import vim

    folder = parent
    for part in [p for p in path.split("/") if p]:
        child = next((c for c in folder.childEntity if isinstance(c, vim.Folder) and c.name == part), None)
        folder = child if child is not None else folder.CreateFolder(part)
    return folder


PACKER_GPU_BUILD = PROJECT_DIR / "templates" / "packer" / "gpu" / "rocky9-vgpu.pkr.hcl"


def toolkit_version_of_the_build() -> str:
    """The NVIDIA Container Toolkit release the GPU template's Packer build installs and records
    (its `nvidia_container_toolkit_version` default), so the planted template records it too."""
    text = PACKER_GPU_BUILD.read_text(encoding="utf-8")
    found = re.search(r'variable "nvidia_container_toolkit_version" \{[^}]*?default\s*=\s*"([^"]+)"', text, re.DOTALL)
    if found is None:
        raise ValueError(f"{PACKER_GPU_BUILD}: no nvidia_container_toolkit_version default")
    return found.group(1)


def _template(
    si: Any,
    env: Environment,
    *,
    name: str,
    disk_gb: int,
    memory_mb: int,
    vgpu_profiles: list[str],
    folder: Any,
    records_toolkit: bool,
) -> None:
    from pyVmomi import vim

    from components.vcenter.tasks import wait_for_task

    cluster = _find(si, vim.ClusterComputeResource, env.vcenter.compute_cluster)
    device = vim.vm.device
    changes = [
        device.VirtualDeviceSpec(
            operation=device.VirtualDeviceSpec.Operation.add,
            fileOperation=device.VirtualDeviceSpec.FileOperation.create,
            device=device.VirtualDisk(
                key=-1,
                unitNumber=0,
                controllerKey=1000,
                capacityInKB=disk_gb * 2**20,
                backing=device.VirtualDisk.FlatVer2BackingInfo(diskMode="persistent", thinProvisioned=True),
            ),
        ),
        device.VirtualDeviceSpec(
            operation=device.VirtualDeviceSpec.Operation.add,
            device=device.ParaVirtualSCSIController(key=1000, busNumber=0, sharedBus="noSharing"),
        ),
    ]
    for i, profile in enumerate(vgpu_profiles):
        changes.append(
            device.VirtualDeviceSpec(
                operation=device.VirtualDeviceSpec.Operation.add,
                device=device.VirtualPCIPassthrough(
                    key=-100 - i, backing=device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=profile)
                ),
            )
        )
    large_bar = bool(vgpu_profiles) and needs_64bit_mmio(vgpu_profiles)
    extra_config = dict(vgpu_extra_config(vgpu_profiles))
    if records_toolkit:
        # What the Packer build writes (templates/packer/gpu/rocky9-vgpu.pkr.hcl, vm extra config).
        extra_config[TOOLKIT_VERSION_KEY] = toolkit_version_of_the_build()
    spec = vim.vm.ConfigSpec(
        name=name,
        guestId=GUEST_ID,
        version=f"vmx-{env.vm.hardware_version}",
        numCPUs=2,
        memoryMB=memory_mb,
        # Large-BAR boards need EFI and 64-bit MMIO (components/vsphere/vgpu/profiles.py); a T4 runs on either.
        firmware="efi" if large_bar else "bios",
        extraConfig=[vim.option.OptionValue(key=k, value=v) for k, v in extra_config.items()],
        # A vGPU VM powers on only with all its memory reserved (NVIDIA vGPU user guide).
        memoryReservationLockedToMax=bool(vgpu_profiles),
        files=vim.vm.FileInfo(vmPathName=f"[{env.vcenter.datastore}]"),
        deviceChange=changes,
    )
    task = folder.CreateVM_Task(config=spec, pool=cluster.resourcePool)
    wait_for_task(task)
    vm = task.info.result
    if env.vm.linked_clone:
        wait_for_task(
            vm.CreateSnapshot_Task(
                name=env.vcenter.template_snapshot, description="sealed guest", memory=False, quiesce=False
            )
        )
    vm.MarkAsTemplate()


SIMULATOR_VCENTER_ADDRESS = "127.0.0.1"
"""Where the simulated vCenter answers (scripts/simulator.sh): the one source its hosts'
vSphereClient ruleset accepts once planted."""


def harden_management_rulesets(si: Any, allowed: str, host_name: str | None = None) -> None:
    """Each host's (or `host_name`'s) management rulesets as docs/security.md asks an administrator
    to set them: vSphereClient limited to `allowed` (vCenter's address), CIMSLP disabled
    (HostFirewallSystem.UpdateRuleset/DisableRuleset: vcsim/host_firewall.go). Preflight warns
    about hosts left open (stacks/tools/preflight/checks/esxi_firewall.py)."""
    from pyVmomi import vim

    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
    try:
        for host in view.view:
            if host_name is not None and host.name != host_name:
                continue
            system = host.configManager.firewallSystem
            spec = vim.host.Ruleset.RulesetSpec(allowedHosts=vim.host.Ruleset.IpList(allIp=False, ipAddress=[allowed]))
            system.UpdateRuleset(id="vSphereClient", spec=spec)
            system.DisableRuleset(id="CIMSLP")
    finally:
        view.Destroy()


def plant(si: Any, env: Environment) -> list[str]:
    """Plant `env`'s folder parent and templates; what was planted, one line each."""
    from pyVmomi import vim

    datacenter = _find(si, vim.Datacenter, env.vcenter.datacenter)
    planted = []
    folder_path = env.vcenter.folder.strip("/")
    parent = folder_path.rsplit("/", 1)[0] if "/" in folder_path else ""
    # The program creates only the last folder of vcenter.folder (preflight's placement check).
    if parent:
        _folder(datacenter.vmFolder, parent)
        planted.append(f"VM folder {parent!r}")
    templates_folder = _folder(datacenter.vmFolder, "templates")
    disk_gb = max(env.control_plane.disk_gb, env.gpu_workers.disk_gb)
    _template(
        si,
        env,
        name=env.vcenter.template,
        disk_gb=disk_gb,
        memory_mb=env.control_plane.memory_mb,
        vgpu_profiles=[],
        folder=templates_folder,
        records_toolkit=not env.vcenter.gpu_template,  # the GPU workers' template too, then
    )
    planted.append(f"template {env.vcenter.template!r} (no vGPU)")
    if env.vcenter.gpu_template:
        profiles = list(env.gpu_workers.vgpu_profiles)
        _template(
            si,
            env,
            name=env.vcenter.gpu_template,
            disk_gb=disk_gb,
            memory_mb=env.gpu_workers.memory_mb,
            vgpu_profiles=profiles,
            folder=templates_folder,
            records_toolkit=True,
        )
        planted.append(f"GPU template {env.vcenter.gpu_template!r} (vGPU {', '.join(profiles)})")
    if env.vm.linked_clone:
        planted = [
            line + f", snapshot {env.vcenter.template_snapshot!r}" if "template" in line else line for line in planted
        ]
    harden_management_rulesets(si, SIMULATOR_VCENTER_ADDRESS)
    planted.append(f"hosts' vSphereClient ruleset limited to {SIMULATOR_VCENTER_ADDRESS}, CIMSLP off")
    return planted
