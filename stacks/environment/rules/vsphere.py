"""Rules for the vSphere layer: names and limits vCenter enforces, vGPU profiles, and what the
policy pack refuses in a plan (so `validate` refuses it first, naming the key).
"""

from __future__ import annotations

from collections.abc import Iterator

from components.vsphere.vgpu.profiles import unknown_profile
from stacks.environment.model import Environment, vgpu_board_and_series
from stacks.environment.registry import Problem, rule

MAX_VSPHERE_NAME = 80
"""vCenter refuses inventory names (VMs, networks) longer than 80 characters (vSphere Virtual Machine
Administration, "Virtual machine name": up to 80 characters)."""

POLICY_RDMA_MIN_MTU = 9000
"""`policy/gpucluster_policy/vsphere.py` `RDMA_MIN_MTU`: the pack refuses an RDMA switch below it."""

COMPUTE_SERIES = "c"
_SERIES = {"a": "app streaming", "b": "virtual PC", "q": "workstation (graphics)", "c": "compute"}


@rule
def rdma_switch_mtu_is_jumbo(env: Environment) -> Iterator[Problem]:
    mtu = env.rdma_network.mtu
    if mtu < POLICY_RDMA_MIN_MTU:
        yield Problem(
            ("rdmaNetwork", "mtu"),
            f"{mtu} is under {POLICY_RDMA_MIN_MTU}; RoCE needs jumbo frames and the policy pack refuses the switch "
            f"(rdma-switch-single-uplink-jumbo-mtu); set {POLICY_RDMA_MIN_MTU}",
        )


@rule
def vm_names_fit_vcenter(env: Environment) -> Iterator[Problem]:
    for pool_key, pool in (("controlPlane", env.control_plane), ("gpuWorkers", env.gpu_workers)):
        for j, node in enumerate(pool.nodes):
            vm_name = env.vm_name(node)
            if len(vm_name) > MAX_VSPHERE_NAME:
                yield Problem(
                    (pool_key, "nodes", j, "name"),
                    f"makes the VM name {vm_name!r} {len(vm_name)} characters long; vCenter allows {MAX_VSPHERE_NAME}: "
                    "shorten the node name or vm.namePrefix",
                )


@rule
def vm_names_differ_from_the_template(env: Environment) -> Iterator[Problem]:
    template = env.vcenter.template
    for pool_key, pool in (("controlPlane", env.control_plane), ("gpuWorkers", env.gpu_workers)):
        for j, node in enumerate(pool.nodes):
            if env.vm_name(node) == template:
                yield Problem(
                    (pool_key, "nodes", j, "name"),
                    f"makes the VM name {template!r}, the name of vcenter.template: the template lookup would find "
                    "two VMs; rename the node or the prefix",
                )


@rule
def network_names_distinct(env: Environment) -> Iterator[Problem]:
    net, mgmt = env.rdma_network, env.management_network
    if net.port_group_name.casefold() == mgmt.network_name.casefold():
        yield Problem(
            ("rdmaNetwork", "portGroupName"),
            f"{net.port_group_name!r} is the name of the management network (managementNetwork.networkName); "
            "the PVRDMA port group needs its own name, or the NICs land on the wrong network",
        )
    if net.switch_name.casefold() == net.port_group_name.casefold():
        yield Problem(
            ("rdmaNetwork", "portGroupName"),
            f"{net.port_group_name!r} is also the switch's name; vCenter keeps switches and port groups in one "
            "network folder, so give the port group another name",
        )
    if net.switch_name.casefold() == mgmt.network_name.casefold():
        yield Problem(
            ("rdmaNetwork", "switchName"),
            f"{net.switch_name!r} is the name of the management network; give the RDMA switch its own name",
        )
    for name, path in ((net.switch_name, "switchName"), (net.port_group_name, "portGroupName")):
        if len(name) > MAX_VSPHERE_NAME:
            yield Problem(("rdmaNetwork", path), f"{len(name)} characters; vCenter allows {MAX_VSPHERE_NAME}")


@rule
def vgpu_profiles_fit_training(env: Environment) -> Iterator[Problem]:
    profiles = env.gpu_workers.vgpu_profiles
    first_board: str | None = None
    for i, profile in enumerate(profiles):
        board, series = vgpu_board_and_series(profile)
        path = ("gpuWorkers", "vgpuProfiles", i)
        if series != COMPUTE_SERIES:
            yield Problem(
                path,
                f"{profile!r} is a {_SERIES[series]} ({series.upper()}-series) profile; GPU workers run CUDA training, "
                f"which needs a compute (C-series) profile, e.g. {profile[:-1]}c",
            )
        if first_board is None:
            first_board = board
        elif board != first_board:
            yield Problem(
                path,
                f"{profile!r} is on board {board!r} but gpuWorkers.vgpuProfiles[0] is on {first_board!r}; "
                "one VM's vGPUs come from one kind of physical GPU",
            )
        elif profile != profiles[0]:
            yield Problem(
                path,
                f"{profile!r} differs from gpuWorkers.vgpuProfiles[0] {profiles[0]!r}; NVIDIA vGPU allows several "
                "vGPUs in one VM only of the same profile",
            )


@rule
def vgpu_profiles_exist(env: Environment) -> Iterator[Problem]:
    """A C-series name outside its board's table is offered by no host: refused offline, before
    preflight finds it missing on every host (issue 54: `nvidia_l40s-64c`, `grid_l40s-48c`)."""
    for i, profile in enumerate(env.gpu_workers.vgpu_profiles):
        why = unknown_profile(profile)
        if why is not None:
            yield Problem(("gpuWorkers", "vgpuProfiles", i), f"{profile!r} exists on no host: {why}")


@rule
def gpu_template_is_not_the_control_planes(env: Environment) -> Iterator[Problem]:
    if env.vcenter.gpu_template is not None and env.vcenter.gpu_template == env.vcenter.template:
        yield Problem(
            ("vcenter", "gpuTemplate"),
            "is vcenter.template; the GPU template carries the workers' vGPU device, which control-plane "
            "clones must not get (they reserve no memory and would not power on): name a separate template",
        )


@rule
def folder_is_relative_to_the_vm_root(env: Environment) -> Iterator[Problem]:
    """pulumi-vsphere's Folder `path` and the VM's `folder` are relative to the datacenter's VM folder
    (terraform-provider-vsphere, folder docs: "relative to the root of the type of folder ... and the
    supplied datacenter": `gpu-cluster/dev` is `/<datacenter>/vm/gpu-cluster/dev`). An inventory path
    would name a folder under `/<datacenter>/vm/<datacenter>/vm/...`, whose parents do not exist."""
    folder = env.vcenter.folder
    parts = [part for part in folder.split("/") if part]
    prefixes = ([env.vcenter.datacenter, "vm"], ["vm"])
    relative: str | None
    for prefix in prefixes:
        if parts[: len(prefix)] == prefix and len(parts) > len(prefix):
            relative = "/".join(parts[len(prefix) :])
            break
    else:
        relative = "/".join(parts) if folder.startswith("/") else None
    if relative is not None:
        yield Problem(
            ("vcenter", "folder"),
            f"{folder!r} is an inventory path; the folder is relative to the datacenter's VM folder: "
            f"write it as {relative}",
        )
