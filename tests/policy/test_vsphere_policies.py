"""vSphere policies: memory reservation of vGPU/PCI/PVRDMA VMs, the RDMA switch layout."""

from __future__ import annotations

from typing import Any

import pytest

from policy.gpucluster_policy._common import SWITCH_TYPE, VGPU_ATTACHMENT_TYPE, VM_TYPE
from policy.gpucluster_policy.vsphere import (
    validate_passthrough_vm_reservation,
    validate_rdma_switch,
    validate_vgpu_vm_reservation,
)

FULL = {"memory": 24576, "memoryReservation": 24576, "memoryReservationLockedToMax": True}


def vm_props(**overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": "dev-gpu-worker-1",
        "memory": 24576,
        "numCpus": 4,
        "networkInterfaces": [{"adapterType": "vmxnet3", "networkId": "network-1"}],
    }
    props.update(overrides)
    return props


# --- vgpu-vm-full-memory-reservation (stack) ---------------------------------------------------


def test_vgpu_vm_with_full_reservation_passes(policy_resource, stack_args, collector) -> None:
    vm = policy_resource(VM_TYPE, vm_props(**FULL, id="4211aaaa-0000"), name="worker-1")
    attachment = policy_resource(
        VGPU_ATTACHMENT_TYPE,
        {"vm_id": "4211aaaa-0000", "profiles": ["grid_t4-16c"]},
        name="worker-1-vgpu",
        dependencies=[vm],
        property_dependencies={"vm_id": [vm]},
    )
    validate_vgpu_vm_reservation(stack_args([vm, attachment]), collector)
    assert collector.reported == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, "memoryReservation is unset MB but memory is 24576 MB"),
        ({"memoryReservation": 8192, "memoryReservationLockedToMax": True}, "memoryReservation is 8192 MB"),
        ({"memoryReservation": 24576}, "memoryReservationLockedToMax is not true"),
    ],
)
def test_vgpu_vm_without_full_reservation_fails(
    policy_resource, stack_args, collector, overrides: dict[str, Any], expected: str
) -> None:
    vm = policy_resource(VM_TYPE, vm_props(**overrides), name="worker-1")
    attachment = policy_resource(
        VGPU_ATTACHMENT_TYPE, {"vm_id": "x"}, name="worker-1-vgpu", property_dependencies={"vm_id": [vm]}
    )
    validate_vgpu_vm_reservation(stack_args([vm, attachment]), collector)
    assert len(collector.reported) >= 1
    message, urn = collector.reported[0]
    assert expected in message
    assert "VM worker-1 gets a vGPU from worker-1-vgpu" in message
    assert urn == vm.urn


def test_vgpu_join_by_vm_id_output_when_no_dependencies_are_known(policy_resource, stack_args, collector) -> None:
    """In real state the VM's `id` output is its BIOS UUID, which the attachment's `vm_id` holds."""
    reserved = policy_resource(VM_TYPE, vm_props(**FULL, id="4211-good"), name="good")
    bare = policy_resource(VM_TYPE, vm_props(id="4211-BAD"), name="bad")
    attachment = policy_resource(VGPU_ATTACHMENT_TYPE, {"vm_id": "4211-bad"}, name="bad-vgpu")
    validate_vgpu_vm_reservation(stack_args([reserved, bare, attachment]), collector)
    assert [urn for _, urn in collector.reported] == [bare.urn, bare.urn]


def test_vm_without_vgpu_needs_no_reservation(policy_resource, stack_args, collector) -> None:
    master = policy_resource(VM_TYPE, vm_props(), name="master")
    validate_vgpu_vm_reservation(stack_args([master]), collector)
    assert collector.reported == []


def test_vgpu_attachment_to_unknown_vm_fails(policy_resource, stack_args, collector) -> None:
    attachment = policy_resource(VGPU_ATTACHMENT_TYPE, {"vm_id": "4211-elsewhere"}, name="stray-vgpu")
    validate_vgpu_vm_reservation(stack_args([attachment]), collector)
    assert collector.reported == [
        (
            "vGPU attachment stray-vgpu targets a VM that is not managed in this stack (vm_id '4211-elsewhere'), "
            "so its memory reservation cannot be checked",
            attachment.urn,
        )
    ]


# --- passthrough-vm-full-memory-reservation (resource) ------------------------------------------


def test_pvrdma_vm_with_full_reservation_passes(resource_args, collector) -> None:
    nics = [{"adapterType": "vmxnet3"}, {"adapterType": "vmxnet3vrdma"}]
    validate_passthrough_vm_reservation(resource_args(VM_TYPE, vm_props(**FULL, networkInterfaces=nics)), collector)
    assert collector.reported == []


def test_plain_vm_without_reservation_passes(resource_args, collector) -> None:
    validate_passthrough_vm_reservation(resource_args(VM_TYPE, vm_props()), collector)
    assert collector.reported == []


def test_pvrdma_vm_without_reservation_fails(resource_args, collector) -> None:
    nics = [{"adapterType": "vmxnet3"}, {"adapterType": "vmxnet3vrdma"}]
    args = resource_args(VM_TYPE, vm_props(networkInterfaces=nics, memoryReservation=1024), name="worker-2")
    validate_passthrough_vm_reservation(args, collector)
    assert collector.messages == [
        "VM worker-2 has a PVRDMA NIC (adapterType vmxnet3vrdma): memoryReservation is 1024 MB but memory is "
        "24576 MB; set memory_reservation to the VM's memory",
        "VM worker-2 has a PVRDMA NIC (adapterType vmxnet3vrdma): memoryReservationLockedToMax is not true; "
        "set memory_reservation_locked_to_max=True",
    ]


def test_pci_passthrough_vm_without_lock_fails(resource_args, collector) -> None:
    args = resource_args(VM_TYPE, vm_props(pciDeviceIds=["0000:3b:00.0"], memoryReservation=24576), name="dp")
    validate_passthrough_vm_reservation(args, collector)
    assert collector.messages == [
        "VM dp has PCI passthrough devices (pciDeviceIds): memoryReservationLockedToMax is not true; "
        "set memory_reservation_locked_to_max=True"
    ]


def test_reservation_policy_ignores_other_types(resource_args, collector) -> None:
    validate_passthrough_vm_reservation(resource_args(SWITCH_TYPE, {"pciDeviceIds": ["x"]}), collector)
    assert collector.reported == []


# --- rdma-switch-single-uplink-jumbo-mtu (resource) ---------------------------------------------


def switch_props(**overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": "dev-rdma-dvs",
        "uplinks": ["uplink-rdma"],
        "activeUplinks": ["uplink-rdma"],
        "standbyUplinks": [],
        "maxMtu": 9000,
        "hosts": [
            {"hostSystemId": "host-1", "devices": ["vmnic4"]},
            {"hostSystemId": "host-2", "devices": ["vmnic4"]},
        ],
    }
    props.update(overrides)
    return props


def test_single_uplink_jumbo_switch_passes(resource_args, collector) -> None:
    validate_rdma_switch(resource_args(SWITCH_TYPE, switch_props()), collector)
    assert collector.reported == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"uplinks": ["u1", "u2"]}, "2 uplinks (u1, u2); PVRDMA does not support NIC teaming"),
        ({"uplinks": None, "activeUplinks": None}, "uplinks is unset, and pulumi-vsphere then creates 4 uplinks"),
        ({"activeUplinks": ["u1", "u2"]}, "2 active uplinks (u1, u2)"),
        ({"standbyUplinks": ["uplink-2"]}, "standby uplinks (uplink-2)"),
        ({"maxMtu": 1500}, "maxMtu is 1500; RoCE needs jumbo frames, set max_mtu=9000"),
        ({"maxMtu": None}, "maxMtu is unset (vSphere's default is 1500)"),
        (
            {"hosts": [{"hostSystemId": "host-1", "devices": ["vmnic4", "vmnic5"]}]},
            "host host-1 has 2 uplink devices (vmnic4, vmnic5)",
        ),
        ({"hosts": [{"hostSystemId": "host-1", "devices": []}]}, "host host-1 has 0 uplink devices (none)"),
    ],
)
def test_teamed_or_small_mtu_switch_fails(resource_args, collector, overrides: dict[str, Any], expected: str) -> None:
    props = {k: v for k, v in switch_props(**overrides).items() if v is not None}
    validate_rdma_switch(resource_args(SWITCH_TYPE, props, name="rdma-switch"), collector)
    assert len(collector.messages) == 1, collector.messages
    assert collector.messages[0].startswith("distributed switch rdma-switch: ")
    assert expected in collector.messages[0]
