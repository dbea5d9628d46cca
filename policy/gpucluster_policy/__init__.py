"""The policies of the vsphere-gpu-cluster pack, as plain validation functions plus the list the
pack serves. All are mandatory: each one guards something that must never ship."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ResourceValidationPolicy,
    StackValidationPolicy,
)

from .kubernetes import (
    ALLOW_PRIVILEGED_KEY,
    validate_mpijob_worker_gpus,
    validate_no_privileged_containers,
    validate_pinned_images,
)
from .protection import REQUIRE_KEY, STACKS_KEY, validate_protected_in_prod
from .vsphere import validate_passthrough_vm_reservation, validate_rdma_switch, validate_vgpu_vm_reservation

PACK_NAME = "vsphere-gpu-cluster-guardrails"

MANDATORY = EnforcementLevel.MANDATORY

POLICIES: list[Policy] = [
    StackValidationPolicy(
        name="vgpu-vm-full-memory-reservation",
        description="A VM with an NVIDIA vGPU (VgpuAttachment) must reserve all of its memory, locked to max.",
        validate=validate_vgpu_vm_reservation,
        enforcement_level=MANDATORY,
    ),
    ResourceValidationPolicy(
        name="passthrough-vm-full-memory-reservation",
        description="A VM with PCI passthrough devices or a PVRDMA NIC must reserve all of its memory, locked to max.",
        validate=validate_passthrough_vm_reservation,
        enforcement_level=MANDATORY,
    ),
    ResourceValidationPolicy(
        name="rdma-switch-single-uplink-jumbo-mtu",
        description="The RDMA distributed switch has exactly one uplink (one vmnic per host), no standby uplinks, MTU 9000.",
        validate=validate_rdma_switch,
        enforcement_level=MANDATORY,
    ),
    ResourceValidationPolicy(
        name="no-privileged-containers",
        description="No Kubernetes container runs privileged (except image repositories listed in allowPrivilegedImages).",
        validate=validate_no_privileged_containers,
        enforcement_level=MANDATORY,
        config_schema=PolicyConfigSchema(
            properties={
                ALLOW_PRIVILEGED_KEY: {
                    "type": "array",
                    "items": {"type": "string"},
                    "default": [],
                    "description": "Image repositories (without tag) allowed to run privileged; each entry "
                    "needs its reason in docs/policy-and-preflight.md.",
                }
            }
        ),
    ),
    ResourceValidationPolicy(
        name="pinned-container-images",
        description="Every Kubernetes container image is pinned to a version tag other than 'latest', or a digest.",
        validate=validate_pinned_images,
        enforcement_level=MANDATORY,
    ),
    ResourceValidationPolicy(
        name="mpijob-workers-limit-gpus",
        description="Every MPIJob's Worker pods set a resources.limits['nvidia.com/gpu'] of at least 1.",
        validate=validate_mpijob_worker_gpus,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="protected-in-prod",
        description="In prod, the distributed switch, its port groups and all VMs are protected (`protect`).",
        validate=validate_protected_in_prod,
        enforcement_level=MANDATORY,
        config_schema=PolicyConfigSchema(
            properties={
                REQUIRE_KEY: {
                    "type": "boolean",
                    "description": "Require protection regardless of the stack name (policy-config.prod.json sets true).",
                },
                STACKS_KEY: {
                    "type": "array",
                    "items": {"type": "string"},
                    "default": ["prod"],
                    "description": "Stack names that require protection when requireProtection is not set.",
                },
            }
        ),
    ),
]

__all__ = ["PACK_NAME", "POLICIES"]
