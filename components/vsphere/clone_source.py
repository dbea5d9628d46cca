"""What every VM of a pool takes from its template, and the template id a VM is cloned from."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_vsphere as vsphere


@dataclass(frozen=True)
class CloneSource:
    """What every VM of a pool takes from the template, lifted out of the template lookup once per
    pool: lifting it per VM made 15 Outputs per VM that all resolve to the same values."""

    template_uuid: pulumi.Output[str]
    guest_id: pulumi.Output[str]
    firmware: pulumi.Output[str]
    scsi_type: pulumi.Output[str]
    disk_size: pulumi.Input[int]
    disk_thin_provisioned: pulumi.Output[bool]
    disk_eagerly_scrub: pulumi.Output[bool]
    hardware_version: pulumi.Output[int]

    @classmethod
    def of(
        cls,
        template: pulumi.Output[vsphere.GetVirtualMachineResult],
        *,
        linked_clone: bool,
        disk_gb: int,
        hardware_version: int,
    ) -> CloneSource:
        """The pool's settings that decide what a clone takes: `linked_clone`, `disk_gb` and the
        `hardware_version` floor (`NodePoolArgs`)."""
        first_disk = template.disks[0]
        return cls(
            template_uuid=template.id,
            guest_id=template.guest_id,
            firmware=template.firmware,
            scsi_type=template.scsi_type,
            # A linked clone keeps the template's disk size (see NodePoolArgs.disk_gb).
            disk_size=first_disk.size if linked_clone else disk_gb,
            disk_thin_provisioned=first_disk.thin_provisioned,
            disk_eagerly_scrub=first_disk.eagerly_scrub,
            # pulumi-vsphere refuses to take a clone below its template's version ("cannot
            # downgrade virtual machine hardware version": terraform-provider-vsphere,
            # SetHardwareVersion); the configured version is a floor.
            hardware_version=template.hardware_version.apply(
                lambda version: effective_hardware_version(hardware_version, version)
            ),
        )


def replaced_with(trigger: pulumi.Resource) -> pulumi.Output[str]:
    """A VM's `datastore_path`: always "" (the datastore's root, as when unset: the provider acts on a
    non-empty value only, `buildVMPathName` and the clone's `GetOk`), known even in a preview, but
    recorded as coming from `trigger` (a property dependency).

    Why: the property is ForceNew in terraform-provider-vsphere (resource_vsphere_virtual_machine.go),
    and when `trigger` is replaced delete-first, Pulumi diffs the VM with that property unknown
    (step_generator.go, calculateDependentReplacements); the SDK marks an unknown ForceNew
    attribute RequiresNew (helper/schema `finalizeDiff`), so the VM is deleted before `trigger` and
    re-created with the program's current inputs. A property inside `clone` would not do: the whole
    block turns unknown, which the provider's own ForceNew rule for it (its CustomizeDiff, by
    changed `clone.0.*` keys) does not see. Known rather than derived from `trigger`'s id: a new
    trigger's id is unknown in a preview, and an unknown ForceNew value there would show every VM
    as replaced (and fail the preview of a protected one) although the update changes nothing."""

    async def empty() -> str:
        return ""

    async def known() -> bool:
        return True

    return pulumi.Output({trigger}, empty(), known())


def effective_hardware_version(configured: int, template: int | None) -> int:
    """The version a clone gets: the configured one, or the template's when that is newer."""
    return max(configured, template or 0)
