"""Order between ESXi hosts' settings and the VMs on them, read from the real program's graph.

Pulumi creates and updates in dependency order, runs every update before any delete, and deletes
last, in reverse dependency order (a resource goes before what it depends on). So:

- a GPU worker must depend on its own host's switch membership, PVRDMA settings and graphics mode
  (vGPU VMs power on only on a host whose GPU runs in Shared Direct mode), and on nothing of other
  hosts (that would serialise hosts for no reason);
- removing a host must not *update* the switch (vCenter refuses to drop a member whose vmknic and
  VM ports are still attached: `ResourceInUse`); its membership must be a delete that everything
  on the host depends on, so it runs last.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stacks.environment.model import Environment
from stacks.tools.plan.mock_runtime import ProgramRun, RecordedResource
from tests.program.test_vsphere_layer import SWITCH, VM, closure, name_of, workers

MEMBER = "gpucluster:vsphere:DvsHostMember"
GRAPHICS = "gpucluster:vsphere:HostGraphicsMode"
PVRDMA_HOST = "gpucluster:vsphere:PvrdmaHostSettings"
VNIC = "vsphere:index/vnic:Vnic"
FABRIC_TYPES = {SWITCH, "vsphere:index/distributedPortGroup:DistributedPortGroup", VNIC, PVRDMA_HOST, MEMBER, GRAPHICS}

Edit = Callable[[dict[str, Any]], None]


def host_settings(host: str) -> set[str]:
    return {f"rdma-member-{host}", f"rdma-pvrdma-{host}", f"rdma-graphics-{host}"}


def waits_on(run: ProgramRun, resource: RecordedResource) -> set[str]:
    return {name_of(urn) for urn in closure(run, resource)}


def test_each_worker_waits_on_its_own_hosts_settings_and_no_other_hosts(
    dev_run: ProgramRun, dev_env: Environment
) -> None:
    hosts = [host.name for host in dev_env.hosts]
    for node in dev_env.gpu_workers.nodes:
        assert node.host is not None
        reached = waits_on(dev_run, dev_run.named(f"gpu-workers-{node.name}"))
        assert host_settings(node.host) <= reached, node.name
        others = [h for h in hosts if h != node.host]
        assert not [name for name in reached if any(other in name for other in others)], node.name
        vgpu = dev_run.named(f"gpu-workers-{node.name}-vgpu")
        assert host_settings(node.host) <= waits_on(dev_run, vgpu)


def test_the_control_plane_waits_on_no_host(dev_run: ProgramRun, dev_env: Environment) -> None:
    reached = waits_on(dev_run, dev_run.named("control-plane-master"))
    assert not [name for name in reached if any(host.name in name for host in dev_env.hosts)]


def test_a_worker_without_a_host_waits_on_every_host(
    run_edited: Callable[[Edit], ProgramRun], dev_env: Environment
) -> None:
    # DRS may start an unpinned worker on any GPU host, so it needs them all ready.
    def unpinned(env: dict[str, Any]) -> None:
        env["gpuWorkers"]["placement"] = "anti-affinity"
        for node in env["gpuWorkers"]["nodes"]:
            node.pop("host", None)

    run = run_edited(unpinned)

    reached = waits_on(run, run.named("gpu-workers-worker-1"))
    assert all(host_settings(host.name) <= reached for host in dev_env.hosts)


def _diffed(inputs: dict[str, Any], ignored: set[str]) -> dict[str, Any]:
    return {key: value for key, value in inputs.items() if key not in ignored}


def _updated(before: ProgramRun, after: ProgramRun, types: set[str]) -> list[str]:
    """Resources of `types` present in both runs whose inputs differ where Pulumi would diff them
    (properties under ignoreChanges keep their old value)."""
    changed = []
    for old in before.resources:
        if old.type not in types or not any(r.name == old.name for r in after.resources):
            continue
        new = after.named(old.name)
        ignored = set(old.ignore_changes)
        if _diffed(old.plain_inputs(), ignored) != _diffed(new.plain_inputs(), ignored):
            changed.append(old.name)
    return changed


def test_removing_a_host_updates_no_switch_and_leaves_the_switch_last(
    dev_run: ProgramRun, run_edited: Callable[[Edit], ProgramRun]
) -> None:
    removed = "esxi-04.lab.example.com"

    def without_host(env: dict[str, Any]) -> None:
        env["hosts"] = [h for h in env["hosts"] if h["name"] != removed]
        nodes = env["gpuWorkers"]["nodes"]
        nodes[:] = [n for n in nodes if n.get("host") != removed]

    after = run_edited(without_host)

    # Updates run before deletes: none may touch the fabric (the old program updated the
    # switch's `hosts` here, while the host's vmknic and worker were still attached).
    assert _updated(dev_run, after, FABRIC_TYPES) == []
    deleted = {r.name for r in dev_run.resources} - {r.name for r in after.resources}
    member = f"rdma-member-{removed}"
    users = {f"rdma-vmk-{removed}", f"rdma-pvrdma-{removed}", "gpu-workers-worker-4", "gpu-workers-worker-4-vgpu"}
    assert {member, *users} <= deleted
    # Deletes run in reverse dependency order: each user of the host goes before its membership.
    for name in users:
        assert member in waits_on(dev_run, dev_run.named(name)), name


def test_adding_a_host_updates_no_switch(dev_run: ProgramRun, run_edited: Callable[[Edit], ProgramRun]) -> None:
    def with_host(env: dict[str, Any]) -> None:
        env["hosts"].append({"name": "esxi-05.lab.example.com", "rdmaVmnics": ["vmnic4"], "vmknicIp": "192.168.0.28"})

    after = run_edited(with_host)

    assert _updated(dev_run, after, FABRIC_TYPES) == []
    member = after.named("rdma-member-esxi-05.lab.example.com")
    assert member.type == MEMBER
    assert member.inputs["vmnics"] == ["vmnic4"]
    assert member.resource_dependencies == [only_switch(after).urn]


def only_switch(run: ProgramRun) -> RecordedResource:
    [switch] = run.by_type(SWITCH)
    return switch


def test_workers_are_still_independent_of_each_other(dev_run: ProgramRun) -> None:
    vms = {vm.urn for vm in workers(dev_run)}
    for vm in dev_run.by_type(VM):
        assert not closure(dev_run, vm) & (vms - {vm.urn})


def test_prod_workers_wait_on_the_graphics_check_of_their_host(prod_run: ProgramRun) -> None:
    # hostGraphics.manage: false still registers a verifying HostGraphicsMode per host; a worker
    # must not start before its host passed it.
    for vm in workers(prod_run):
        graphics = {name for name in waits_on(prod_run, vm) if name.startswith("rdma-graphics-")}
        assert len(graphics) == 1, vm.name
        [name] = graphics
        assert prod_run.named(name).inputs["manage"] is False
