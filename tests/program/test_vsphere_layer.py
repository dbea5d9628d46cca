"""The vSphere layer of the real program, run for dev (and prod) under the SDK's mocks.

What a vSphere admin would check after `pulumi up`: one RDMA switch with one uplink per host,
each host's PVRDMA vmknic with its own address, workers with a management NIC and a PVRDMA NIC,
memory fully reserved, one vGPU and one pin rule each; and what an operator relies on: hosts and
VMs built in parallel (no cross dependencies), stable names, prod protected.

The Kubernetes layer registers more resources in the same run; everything here filters by type
and name, so it holds as that layer grows.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable
from ipaddress import IPv4Address
from typing import Any

import pytest

from components.vsphere.first_boot import GUESTINFO_KEYS
from components.vsphere.node_pool import LINKED_CLONE_ROLLED_PROPERTIES, ROLLED_PROPERTIES
from stacks.environment.model import Environment
from stacks.tools.plan.mock_runtime import SECRET_MARK, ProgramRun, RecordedResource, contains_secret

SWITCH = "vsphere:index/distributedVirtualSwitch:DistributedVirtualSwitch"
PORT_GROUP = "vsphere:index/distributedPortGroup:DistributedPortGroup"
VNIC = "vsphere:index/vnic:Vnic"
PVRDMA_HOST = "gpucluster:vsphere:PvrdmaHostSettings"
VM = "vsphere:index/virtualMachine:VirtualMachine"
VGPU = "gpucluster:vsphere:VgpuAttachment"
HOST_GROUP = "vsphere:index/computeClusterHostGroup:ComputeClusterHostGroup"
VM_GROUP = "vsphere:index/computeClusterVmGroup:ComputeClusterVmGroup"
VM_HOST_RULE = "vsphere:index/computeClusterVmHostRule:ComputeClusterVmHostRule"
FOLDER = "vsphere:index/folder:Folder"
RDMA_FABRIC = "gpucluster:vsphere:RdmaFabric"
NODE_POOL = "gpucluster:vsphere:NodePool"

Edit = Callable[[dict[str, Any]], None]


def only(resources: Iterable[RecordedResource]) -> RecordedResource:
    [resource] = list(resources)
    return resource


def name_of(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def closure(run: ProgramRun, start: RecordedResource) -> set[str]:
    """Every URN `start` waits on, directly or through what it waits on."""
    by_urn = {r.urn: r for r in run.resources}
    seen: set[str] = set()
    todo = list(start.dependencies)
    while todo:
        urn = todo.pop()
        if urn not in seen:
            seen.add(urn)
            todo.extend(by_urn[urn].dependencies if urn in by_urn else [])
    return seen


def workers(run: ProgramRun) -> list[RecordedResource]:
    pool = run.named("gpu-workers")
    return [r for r in run.by_type(VM) if r.parent == pool.urn]


def worker_vm(run: ProgramRun, node: str) -> RecordedResource:
    return run.named(f"gpu-workers-{node}")


def first_boot_metadata(vm: RecordedResource) -> dict[str, Any]:
    extra_config = vm.plain_inputs()["extraConfig"]
    assert extra_config["guestinfo.metadata.encoding"] == "base64"
    return json.loads(base64.b64decode(extra_config["guestinfo.metadata"]))


# --- the RDMA fabric ---------------------------------------------------------------------------


def test_one_switch_with_one_uplink_and_each_hosts_rdma_vmnic(dev_run: ProgramRun, dev_env: Environment) -> None:
    switch = only(dev_run.by_type(SWITCH)).inputs
    assert switch["name"] == "dev-rdma-dvs"
    assert switch["uplinks"] == switch["activeUplinks"] and len(switch["uplinks"]) == 1
    assert switch["standbyUplinks"] == []
    assert switch["maxMtu"] == 9000
    assert (switch["linkDiscoveryProtocol"], switch["linkDiscoveryOperation"]) == ("lldp", "both")
    # Members are their own resources (DvsHostMember), so removing a host never updates the switch.
    assert switch["hosts"] == []
    assert only(dev_run.by_type(SWITCH)).ignore_changes == ["hosts"]
    members = dev_run.by_type("gpucluster:vsphere:DvsHostMember")
    assert sorted((m.inputs["host_name"], tuple(m.inputs["vmnics"])) for m in members) == [
        (host.name, ("vmnic4",)) for host in sorted(dev_env.hosts, key=lambda h: h.name)
    ]


def test_port_group_on_the_switch_with_the_vlan(dev_run: ProgramRun) -> None:
    switch, port_group = only(dev_run.by_type(SWITCH)), only(dev_run.by_type(PORT_GROUP))
    assert port_group.inputs["name"] == "dev-pvrdma"
    assert port_group.inputs["vlanId"] == 0
    assert port_group.inputs["activeUplinks"] == switch.inputs["uplinks"]
    assert port_group.dependencies == [switch.urn]


def test_rdma_settings_flow_from_the_stack_file(run_edited: Callable[[Edit], ProgramRun]) -> None:
    def tagged(env: dict[str, Any]) -> None:
        env["rdmaNetwork"].update(vlanId=42, vmknicMtu=8000, lldp="listen")

    run = run_edited(tagged)
    assert only(run.by_type(PORT_GROUP)).inputs["vlanId"] == 42
    assert only(run.by_type(SWITCH)).inputs["linkDiscoveryOperation"] == "listen"
    assert {vnic.inputs["mtu"] for vnic in run.by_type(VNIC)} == {8000}
    assert first_boot_metadata(worker_vm(run, "worker-1"))["network"]["ethernets"]["rdma0"]["mtu"] == 8000


def test_each_host_gets_a_vmknic_with_its_own_address(dev_run: ProgramRun, dev_env: Environment) -> None:
    assert len(dev_run.by_type(VNIC)) == len(dev_env.hosts) == 4
    switch, port_group = only(dev_run.by_type(SWITCH)), only(dev_run.by_type(PORT_GROUP))
    for host in dev_env.hosts:
        vnic = dev_run.named(f"rdma-vmk-{host.name}")
        assert vnic.type == VNIC
        assert vnic.inputs["ipv4"] == {"ip": str(host.vmknic_ip), "netmask": "255.255.255.0"}
        assert vnic.inputs["mtu"] == 9000
        assert set(vnic.dependencies) == {switch.urn, port_group.urn, dev_run.urn_of(f"rdma-member-{host.name}")}


def test_no_host_waits_on_another_host(dev_run: ProgramRun, dev_env: Environment) -> None:
    names = [host.name for host in dev_env.hosts]
    per_host = [r for r in dev_run.resources if any(name in r.name for name in names)]
    assert len(per_host) >= 3 * len(names)  # vmknic, PVRDMA settings, graphics mode at least
    for resource in per_host:
        own = [name for name in names if name in resource.name]
        others = [name for name in names if name not in own]
        reached = {name_of(urn) for urn in closure(dev_run, resource)}
        assert not [n for n in reached if any(other in n for other in others)], resource.name


def test_pvrdma_host_settings_wait_on_their_own_vmknic(dev_run: ProgramRun, dev_env: Environment) -> None:
    settings = dev_run.by_type(PVRDMA_HOST)
    assert len(settings) == len(dev_env.hosts)
    for host in dev_env.hosts:
        resource = dev_run.named(f"rdma-pvrdma-{host.name}")
        assert resource.type == PVRDMA_HOST
        assert resource.inputs["host_name"] == host.name
        assert resource.resource_dependencies == [dev_run.urn_of(f"rdma-vmk-{host.name}")]


# --- the node VMs ---------------------------------------------------------------------------------


def test_one_control_plane_and_four_worker_vms(dev_run: ProgramRun) -> None:
    control_plane = dev_run.named("control-plane")
    assert [r.inputs["name"] for r in dev_run.by_type(VM) if r.parent == control_plane.urn] == ["dev-gpu-master"]
    assert sorted(r.inputs["name"] for r in workers(dev_run)) == [f"dev-gpu-worker-{i}" for i in range(1, 5)]


def test_worker_nics_management_first_then_pvrdma(dev_run: ProgramRun) -> None:
    port_group = only(dev_run.by_type(PORT_GROUP))
    port_group_id = dev_run.by_type(VNIC)[0].inputs["distributedPortGroup"]
    [management_network] = {
        nic["networkId"] for nic in dev_run.named("control-plane-master").inputs["networkInterfaces"]
    }
    assert management_network != port_group_id
    for vm in workers(dev_run):
        management, rdma = vm.inputs["networkInterfaces"]
        assert (management["adapterType"], management["networkId"]) == ("vmxnet3", management_network)
        assert (rdma["adapterType"], rdma["networkId"]) == ("vmxnet3vrdma", port_group_id)
        assert management["useStaticMac"] and rdma["useStaticMac"]
        assert port_group.urn in vm.dependencies


def test_control_plane_has_only_a_management_nic(dev_run: ProgramRun) -> None:
    [nic] = dev_run.named("control-plane-master").inputs["networkInterfaces"]
    assert nic["adapterType"] == "vmxnet3"


def test_workers_reserve_and_lock_all_memory_control_plane_does_not(dev_run: ProgramRun) -> None:
    for vm in workers(dev_run):
        assert vm.inputs["memory"] == 24576
        assert vm.inputs["memoryReservation"] == vm.inputs["memory"]
        assert vm.inputs["memoryReservationLockedToMax"] is True
    control_plane = dev_run.named("control-plane-master").inputs
    assert control_plane["memory"] == 16384
    assert not control_plane.get("memoryReservation")
    assert not control_plane.get("memoryReservationLockedToMax")


def test_one_vgpu_per_worker_waiting_on_its_own_vm_only(dev_run: ProgramRun, dev_env: Environment) -> None:
    assert len(dev_run.by_type(VGPU)) == len(dev_env.gpu_workers.nodes)
    for node in dev_env.gpu_workers.nodes:
        vgpu = dev_run.named(f"gpu-workers-{node.name}-vgpu")
        assert vgpu.type == VGPU
        assert vgpu.inputs["profiles"] == ["grid_t4-16c"]
        assert vgpu.inputs["vm_name"] == f"dev-gpu-{node.name}"
        assert vgpu.resource_dependencies == [worker_vm(dev_run, node.name).urn]


def test_each_worker_is_pinned_to_its_host_by_its_own_mandatory_rule(dev_run: ProgramRun, dev_env: Environment) -> None:
    rules = dev_run.by_type(VM_HOST_RULE)
    assert len(rules) == len(dev_env.gpu_workers.nodes)
    for node in dev_env.gpu_workers.nodes:
        assert node.host is not None
        vm = worker_vm(dev_run, node.name)
        rule = dev_run.named(f"gpu-workers-{node.name}-pin")
        vm_group = dev_run.named(f"gpu-workers-{node.name}-vms")
        host_group = dev_run.named(f"gpu-workers-{node.name}-hosts")
        host_id = dev_run.named(f"rdma-vmk-{node.host}").inputs["host"]
        assert rule.inputs["mandatory"] is True
        assert rule.inputs["vmGroupName"] == vm_group.inputs["name"]
        assert rule.inputs["affinityHostGroupName"] == host_group.inputs["name"]
        assert set(rule.dependencies) == {vm_group.urn, host_group.urn}
        assert [urn for urn in vm_group.dependencies if name_of(urn).startswith("gpu-workers-")] == [vm.urn]
        assert host_group.inputs["hostSystemIds"] == [host_id]
        assert vm.inputs["hostSystemId"] == host_id
    assert len({rule.inputs["name"] for rule in rules}) == len(rules)


def test_no_vm_waits_on_another_vm(dev_run: ProgramRun) -> None:
    vms = {vm.urn for vm in dev_run.by_type(VM)}
    assert len(vms) == 5
    for vm in dev_run.by_type(VM):
        assert not closure(dev_run, vm) & vms, vm.name


def test_first_boot_data_is_secret_and_not_diffed(dev_run: ProgramRun) -> None:
    for vm in dev_run.by_type(VM):
        assert contains_secret(vm.inputs["extraConfig"])
        assert vm.redacted_inputs()["extraConfig"] == SECRET_MARK
        # The guestinfo keys, and what only the node's rolling-update gate may change (test_day_two);
        # dev's linked clones take their disk from the template, so its size is held too.
        assert vm.ignore_changes == [f'extraConfig["{key}"]' for key in GUESTINFO_KEYS] + [
            *ROLLED_PROPERTIES,
            *LINKED_CLONE_ROLLED_PROPERTIES,
        ]


@pytest.mark.parametrize("node", ["worker-1", "worker-3"])
def test_first_boot_metadata_sets_static_addresses_by_mac(dev_run: ProgramRun, dev_env: Environment, node: str) -> None:
    spec = next(n for n in dev_env.gpu_workers.nodes if n.name == node)
    vm = worker_vm(dev_run, node)
    management_nic, rdma_nic = vm.inputs["networkInterfaces"]
    metadata = first_boot_metadata(vm)

    assert metadata["local-hostname"] == node
    assert metadata["instance-id"] == f"dev-gpu-{node}"
    assert metadata["redact"] == ["userdata", "vendordata"]
    ethernets = metadata["network"]["ethernets"]
    assert set(ethernets) == {"mgmt0", "rdma0"}
    mgmt, rdma = ethernets["mgmt0"], ethernets["rdma0"]
    assert mgmt["match"] == {"macaddress": management_nic["macAddress"]}
    assert rdma["match"] == {"macaddress": rdma_nic["macAddress"]}
    assert mgmt["addresses"] == [f"{spec.management_ip}/24"]
    assert rdma["addresses"] == [f"{spec.rdma_ip}/24"]
    assert mgmt["dhcp4"] is False and rdma["dhcp4"] is False
    assert mgmt["routes"] == [{"to": "default", "via": "10.10.0.1"}]
    assert "routes" not in rdma  # the RDMA network is one L2 segment; the default route stays on mgmt0
    assert rdma["mtu"] == 9000
    assert mgmt["nameservers"] == {"addresses": ["10.10.0.2"], "search": ["lab.example.com"]}


def test_control_plane_first_boot_metadata_has_only_management(dev_run: ProgramRun) -> None:
    metadata = first_boot_metadata(dev_run.named("control-plane-master"))
    assert list(metadata["network"]["ethernets"]) == ["mgmt0"]
    assert metadata["network"]["ethernets"]["mgmt0"]["addresses"] == ["10.10.0.50/24"]


def test_every_mac_is_distinct(dev_run: ProgramRun) -> None:
    macs = [nic["macAddress"] for vm in dev_run.by_type(VM) for nic in vm.inputs["networkInterfaces"]]
    assert len(macs) == 9
    assert len(set(macs)) == len(macs)


# --- protection, names, components ------------------------------------------------------------------


def _guarded(run: ProgramRun) -> list[RecordedResource]:
    return [*run.by_type(SWITCH), *run.by_type(PORT_GROUP), *run.by_type(VM), *run.by_type(FOLDER)]


def test_prod_protects_switch_port_group_and_vms(prod_run: ProgramRun) -> None:
    guarded = _guarded(prod_run)
    assert len(guarded) == 1 + 1 + (3 + 16) + 1
    assert [r.name for r in guarded if not r.protect] == []


def test_dev_protects_nothing(dev_run: ProgramRun) -> None:
    assert [r.name for r in dev_run.resources if r.protect] == []


def test_reordering_hosts_and_workers_renames_nothing(
    dev_run: ProgramRun, run_edited: Callable[[Edit], ProgramRun]
) -> None:
    def reorder(env: dict[str, Any]) -> None:
        env["hosts"].reverse()
        nodes = env["gpuWorkers"]["nodes"]
        nodes[:] = [nodes[2], nodes[0], nodes[3], nodes[1]]

    reordered = run_edited(reorder)

    assert {(r.type, r.name) for r in reordered.resources} == {(r.type, r.name) for r in dev_run.resources}
    # Same names must also mean the same things: each resource waits on the same-named resources.
    vsphere_layer = [r for r in dev_run.resources if r.type.startswith(("vsphere:", "gpucluster:vsphere:"))]
    for resource in vsphere_layer:
        after = reordered.named(resource.name)
        assert sorted(map(name_of, after.dependencies)) == sorted(map(name_of, resource.dependencies)), resource.name
    for vm in workers(dev_run):
        # Same VM, same host, same MACs and addresses: nothing a reorder would have to replace.
        before, after = vm.plain_inputs(), reordered.named(vm.name).plain_inputs()
        assert {k: v for k, v in before.items() if k != "extraConfig"} == {
            k: v for k, v in after.items() if k != "extraConfig"
        }
        assert first_boot_metadata(vm) == first_boot_metadata(reordered.named(vm.name))


def test_components_have_their_type_tokens_and_own_their_children(dev_run: ProgramRun, dev_env: Environment) -> None:
    fabric = only(dev_run.by_type(RDMA_FABRIC))
    assert fabric.name == "rdma" and not fabric.custom
    pools = {pool.name: pool for pool in dev_run.by_type(NODE_POOL)}
    assert set(pools) == {"control-plane", "gpu-workers"}
    for resource_type in (SWITCH, PORT_GROUP, VNIC, PVRDMA_HOST):
        assert {r.parent for r in dev_run.by_type(resource_type)} == {fabric.urn}, resource_type
    for resource_type in (VGPU, HOST_GROUP, VM_GROUP, VM_HOST_RULE):
        assert {r.parent for r in dev_run.by_type(resource_type)} == {pools["gpu-workers"].urn}, resource_type
    assert dev_run.named("control-plane-master").parent == pools["control-plane"].urn
    for vm in workers(dev_run):
        assert vm.name.startswith("gpu-workers-")
    assert len(workers(dev_run)) == len(dev_env.gpu_workers.nodes)


def test_stack_outputs_name_the_fabric_and_every_node(dev_run: ProgramRun, dev_env: Environment) -> None:
    outputs = dev_run.stack_outputs
    assert outputs["rdmaPortGroup"] == "dev-pvrdma"
    assert set(outputs["pvrdmaVmknics"]) == {host.name for host in dev_env.hosts}
    nodes = outputs["nodes"]
    assert set(nodes) == {"master", "worker-1", "worker-2", "worker-3", "worker-4"}
    assert nodes["worker-2"]["rdmaIp"] == "192.168.0.52"
    assert IPv4Address(nodes["master"]["managementIp"]) == IPv4Address("10.10.0.50")
    # Stack outputs use Pulumi's camelCase throughout, like the stack file's keys.
    keys = {key for node in nodes.values() for key in node} | set(outputs)
    assert all(re.fullmatch(r"[a-z][A-Za-z0-9]*", key) for key in keys), sorted(keys)
