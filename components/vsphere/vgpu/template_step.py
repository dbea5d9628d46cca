"""The GPU template's last build step: every vGPU of the workers' profiles, then seal it as a template.

Packer's vsphere-clone builder adds one vGPU device (`gpu_template.GpuTemplateBuild` cites why), so
with several `gpuWorkers.vgpuProfiles` templates/packer/gpu leaves the build VM powered off,
unsnapshotted and not yet a template, and this step finishes it:

1. the VM must be off (vCenter adds a vGPU only to a powered-off VM) and not yet a template
   (a template cannot be reconfigured);
2. on large-BAR boards its firmware must be EFI already (the base template's; switching a guest
   installed for BIOS would leave it unbootable, so that is refused, not changed);
   one reconfigure: the missing vmiop devices (desired minus existing, `plan_vgpu_devices`, the
   same diff VgpuAttachment uses), memory reserved and locked to max (a vGPU VM powers on only with
   all of it reserved), and the 64-bit MMIO keys for the profiles' total (`vgpu_extra_config`);
3. the snapshot `vcenter.templateSnapshot` (linked clones clone it, so it must come after the
   devices), then `MarkAsTemplate`.

Re-running it on a VM it already finished up to step 2 adds nothing. Run it with the vCenter
account in VSPHERE_SERVER, VSPHERE_USER, VSPHERE_PASSWORD (VSPHERE_ALLOW_UNVERIFIED_SSL=true for a
lab's self-signed certificate):

    python -m components.vsphere.vgpu.template_step --vm rocky9-k8s-vgpu-l40s-2x48c \\
        --profile nvidia_l40s-48c --profile nvidia_l40s-48c --snapshot base
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.lookups import find_vm
from components.vcenter.settings import VcenterConnection
from components.vcenter.tasks import wait_for_task
from components.vsphere.gpu_template import gpu_template_build
from components.vsphere.vgpu.devices import build_config_spec, existing_vgpus, extra_config_changes, plan_vgpu_devices


@dataclass(frozen=True)
class Finished:
    """What the step did, for its one line of output."""

    added: tuple[str, ...]
    removed: int
    extra_config: tuple[str, ...]
    snapshot: str | None


def finish_gpu_template(si: Any, vm_name: str, profiles: Sequence[str], *, snapshot: str | None) -> Finished:
    """Give `vm_name` exactly `profiles` as vGPU devices, their MMIO and firmware, then snapshot
    (when `snapshot` is set) and mark it as a template. Raises VsphereError with what to do."""
    build = gpu_template_build(profiles)
    vm = find_vm(si, vm_name)
    if vm is None:
        raise VsphereError(f"VM {vm_name!r} not found: name the VM Packer built (its template_name)")
    if vm.config.template:
        raise VsphereError(
            f"{vm_name} is already a template: vCenter reconfigures no template; rebuild it with the GPU "
            "profiles' list (templates/packer/gpu leaves it a VM when it has more than one), or convert it to a "
            "VM first (vSphere Client: Convert to Virtual Machine)"
        )
    if vm.runtime.powerState != vim.VirtualMachine.PowerState.poweredOff:
        raise VsphereError(f"{vm_name} is {vm.runtime.powerState}: vCenter adds a vGPU only while the VM is off")
    if build.firmware == "efi" and vm.config.firmware != "efi":
        # Not switched here: a guest installed for BIOS does not boot under EFI.
        raise VsphereError(
            f"{vm_name} has {vm.config.firmware} firmware: vGPU {', '.join(build.profiles)} powers on only in an "
            "EFI guest; rebuild it from a base installed for EFI (templates/packer/base sets firmware efi)"
        )
    plan = plan_vgpu_devices(build.profiles, existing_vgpus(vm))
    spec = build_config_spec(vm, plan, lock_memory=True)
    extra = extra_config_changes(vm, build.extra_config)
    if extra:
        spec.extraConfig = extra
    wait_for_task(vm.ReconfigVM_Task(spec=spec), object_name=vm_name, what="adding the vGPU devices")
    if snapshot:
        wait_for_task(
            vm.CreateSnapshot_Task(
                name=snapshot,
                description="vGPU devices added (components/vsphere/vgpu/template_step.py)",
                memory=False,
                quiesce=False,
            ),
            object_name=vm_name,
            what=f"snapshot {snapshot}",
        )
    vm.MarkAsTemplate()
    return Finished(
        added=plan.add, removed=len(plan.remove), extra_config=tuple(o.key for o in extra), snapshot=snapshot
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m components.vsphere.vgpu.template_step",
        description="Add every vGPU of the workers' profiles to the GPU template's build VM, snapshot it, "
        "make it a template (templates/README.md). vCenter from VSPHERE_SERVER, VSPHERE_USER, VSPHERE_PASSWORD.",
    )
    parser.add_argument("--vm", required=True, help="the build VM Packer left (its template_name)")
    parser.add_argument(
        "--profile",
        action="append",
        required=True,
        help="one per vGPU, in gpuWorkers.vgpuProfiles order (repeat: --profile nvidia_l40s-48c --profile ...)",
    )
    parser.add_argument("--snapshot", default="base", help="vcenter.templateSnapshot; '' for none (default: base)")
    args = parser.parse_args(argv)
    from components.vcenter.session import session

    try:
        conn = VcenterConnection.from_pulumi_config(None, os.environ)
        with session(conn) as si:
            done = finish_gpu_template(si, args.vm, args.profile, snapshot=args.snapshot or None)
    except (VsphereError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(
        f"{args.vm}: added {', '.join(done.added) or 'no vGPU (all there)'}"
        + (f", removed {done.removed} other vGPU device(s)" if done.removed else "")
        + (f", set {', '.join(done.extra_config)}" if done.extra_config else "")
        + (f", snapshot {done.snapshot}" if done.snapshot else "")
        + "; now a template"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
