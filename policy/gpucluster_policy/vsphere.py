"""vSphere rules: full memory reservation for vGPU/PCI/PVRDMA VMs, and the RDMA switch layout.

Why these never ship:
- An NVIDIA vGPU or DirectPath VM does not power on without all of its memory reserved, and
  VMware's PVRDMA set-up reserves all guest memory too (DESIGN.md section 2). Locking the
  reservation to max keeps it right when memory is resized later.
- PVRDMA does not support NIC teaming: the HCA must be the switch's only uplink, on every host;
  RoCE wants jumbo frames, so the switch MTU must be 9000.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import PolicyResource, ResourceValidationArgs, StackValidationArgs

from ._common import (
    SWITCH_TYPE,
    VGPU_ATTACHMENT_TYPE,
    VM_TYPE,
    ReportViolation,
    as_bool,
    as_list,
    as_number,
    fmt_number,
    is_mapping,
)

PVRDMA_ADAPTER = "vmxnet3vrdma"
RDMA_MIN_MTU = 9000


def reservation_problems(props: Mapping[str, Any]) -> list[str]:
    """What keeps a VM's memory from being fully reserved; empty when it is."""
    memory = as_number(props.get("memory"))
    reservation = as_number(props.get("memoryReservation"))
    problems = []
    if memory is None or reservation is None or reservation < memory:
        problems.append(
            f"memoryReservation is {fmt_number(reservation)} MB but memory is {fmt_number(memory)} MB; "
            "set memory_reservation to the VM's memory"
        )
    if not as_bool(props.get("memoryReservationLockedToMax")):
        problems.append("memoryReservationLockedToMax is not true; set memory_reservation_locked_to_max=True")
    return problems


def passthrough_reasons(props: Mapping[str, Any]) -> list[str]:
    """Why a VM needs a full reservation, judged from its own properties."""
    reasons = []
    if as_list(props.get("pciDeviceIds")):
        reasons.append("PCI passthrough devices (pciDeviceIds)")
    nics = as_list(props.get("networkInterfaces"))
    if any(is_mapping(nic) and nic.get("adapterType") == PVRDMA_ADAPTER for nic in nics):
        reasons.append(f"a PVRDMA NIC (adapterType {PVRDMA_ADAPTER})")
    return reasons


def validate_passthrough_vm_reservation(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A VM with PCI passthrough devices or a PVRDMA NIC must have all memory reserved, locked to max."""
    if args.resource_type != VM_TYPE:
        return
    reasons = passthrough_reasons(args.props)
    if not reasons:
        return
    for problem in reservation_problems(args.props):
        report_violation(f"VM {args.name} has {' and '.join(reasons)}: {problem}")


def attached_vms(attachment: PolicyResource, vms: list[PolicyResource]) -> list[PolicyResource]:
    """The VMs a VgpuAttachment attaches to.

    In order of precision: the resources its `vm_id` input came from (property dependencies, as
    the engine reports them), a VM whose `id` or `uuid` output equals `vm_id` (the pulumi-vsphere
    VM id is the BIOS UUID), or, where neither is known (an offline plan), the VMs it depends on.
    """
    vm_urns = {vm.urn for vm in vms}
    from_property = [r for r in attachment.property_dependencies.get("vm_id", []) if r.urn in vm_urns]
    if from_property:
        return from_property
    vm_id = attachment.props.get("vm_id")
    if isinstance(vm_id, str) and vm_id:
        wanted = vm_id.strip().lower()
        by_id = [
            vm for vm in vms if any(str(vm.props.get(key) or "").strip().lower() == wanted for key in ("id", "uuid"))
        ]
        if by_id:
            return by_id
    return [r for r in attachment.dependencies if r.urn in vm_urns]


def validate_vgpu_vm_reservation(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Every VM that gets a vGPU (a VgpuAttachment) must have all memory reserved, locked to max.

    pulumi-vsphere cannot attach a vGPU, so the VM resource itself shows no sign of one; the
    attachment is a separate dynamic resource whose `vm_id` names the VM. This joins the two.
    """
    vms = [r for r in args.resources if r.resource_type == VM_TYPE]
    for attachment in args.resources:
        if attachment.resource_type != VGPU_ATTACHMENT_TYPE:
            continue
        targets = attached_vms(attachment, vms)
        if not targets:
            report_violation(
                f"vGPU attachment {attachment.name} targets a VM that is not managed in this stack "
                f"(vm_id {attachment.props.get('vm_id')!r}), so its memory reservation cannot be checked",
                attachment.urn,
            )
            continue
        for vm in targets:
            for problem in reservation_problems(vm.props):
                report_violation(f"VM {vm.name} gets a vGPU from {attachment.name}: {problem}", vm.urn)


def switch_problems(props: Mapping[str, Any]) -> Iterator[str]:
    """What makes a distributed switch unfit for PVRDMA."""
    uplinks = as_list(props.get("uplinks"))
    if not uplinks:
        yield "uplinks is unset, and pulumi-vsphere then creates 4 uplinks; set exactly one uplink"
    elif len(uplinks) != 1:
        yield f"{len(uplinks)} uplinks ({', '.join(map(str, uplinks))}); PVRDMA does not support NIC teaming, set exactly one"
    active = as_list(props.get("activeUplinks"))
    if len(active) > 1:
        yield f"{len(active)} active uplinks ({', '.join(map(str, active))}); set exactly one"
    standby = as_list(props.get("standbyUplinks"))
    if standby:
        yield f"standby uplinks ({', '.join(map(str, standby))}); PVRDMA does not support failover teaming, remove them"
    for index, host in enumerate(as_list(props.get("hosts"))):
        if not is_mapping(host):
            continue
        devices = as_list(host.get("devices"))
        if len(devices) != 1:
            who = host.get("hostSystemId") or f"hosts[{index}]"
            listed = ", ".join(map(str, devices)) or "none"
            yield f"host {who} has {len(devices)} uplink devices ({listed}); give each host exactly its one RDMA vmnic"
    mtu = as_number(props.get("maxMtu"))
    if mtu is None or mtu < RDMA_MIN_MTU:
        shown = "unset (vSphere's default is 1500)" if mtu is None else fmt_number(mtu)
        yield f"maxMtu is {shown}; RoCE needs jumbo frames, set max_mtu={RDMA_MIN_MTU}"


def validate_rdma_switch(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """The RDMA distributed switch: one uplink (one vmnic per host), no standby, MTU 9000.

    Every distributed switch this program creates carries PVRDMA, so the rule applies to all of
    them; a stack that also builds ordinary switches must not run this pack unchanged.
    """
    if args.resource_type != SWITCH_TYPE:
        return
    for problem in switch_problems(args.props):
        report_violation(f"distributed switch {args.name}: {problem}")
