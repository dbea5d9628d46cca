"""The templates the nodes are cloned from: `vcenter.template` (control plane) and
`vcenter.gpuTemplate` (GPU workers).

Each must exist once, be a template, and for linked clones carry exactly the snapshot
`vcenter.templateSnapshot`. What each must carry is judged by the pure checks of
`components.vsphere.gpu_template` (the same ones the vGPU work tests against the simulator): the
GPU template its vGPU devices and, on large-BAR boards, EFI and 64-bit MMIO
(`components.vsphere.vgpu.profiles`); the control plane's template no vGPU at all. Their facts
come from the inventory snapshot (`VmInfo`), so this stays free of pyVmomi.
"""

from __future__ import annotations

from components.k8s.gpu_runtime import MINIMUM_NVIDIA_CONTAINER_TOOLKIT
from components.vcenter.inventory_model import Inventory, VmInfo
from components.vsphere.gpu_template import (
    TEMPLATE_BUILD as BUILD_HINT,
)
from components.vsphere.gpu_template import (
    Finding as TemplateFinding,
)
from components.vsphere.gpu_template import (
    TemplateFacts,
    control_plane_template_findings,
    gpu_template_findings,
    hardware_version_number,
    missing_gpu_template_finding,
    toolkit_findings,
)
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.report import KeyPath, Report


def template_facts_of(vm: VmInfo) -> TemplateFacts:
    """The facts `gpu_template`'s checks judge, from the inventory's plain record of the VM."""
    return TemplateFacts(
        name=vm.name,
        vgpu_profiles=vm.vgpu_profiles,
        firmware=vm.firmware or "bios",
        hardware_version=hardware_version_number(vm.hardware_version),
        extra_config=dict(vm.extra_config),
    )


def _report(report: Report, findings: list[TemplateFinding]) -> None:
    """`gpu_template` names keys as dotted paths below the environment (`vcenter.gpuTemplate`)."""
    for finding in findings:
        report.add(finding.level, tuple(finding.key.split(".")), finding.message)


def _one_template(env: Environment, inv: Inventory, report: Report, field: str, name: str) -> VmInfo | None:
    """Existence, uniqueness and (linked clones) the snapshot of one template; the VM if usable."""
    vc = env.vcenter
    key: KeyPath = ("vcenter", field)
    what = "template" if field == "template" else "GPU template"
    matches = inv.vms.get(name, [])
    if not matches:
        report.blocker(key, f"{what} {name!r} not found; build it ({BUILD_HINT})")
        return None
    if len(matches) > 1:
        report.blocker(key, f"{len(matches)} VMs are named {name!r}; the name must be unique")
        return None
    template = matches[0]
    if template.is_template:
        report.ok(key, f"{what} {name!r} exists")
    else:
        report.warn(
            key,
            f"{name!r} is a VM, not a template; clones of a running VM are not consistent, mark it as a template",
        )
    if not env.vm.linked_clone:
        return template
    # The control plane's template answers for vcenter.templateSnapshot; the GPU template's own
    # snapshot problems are fixed on that template, so they point at vcenter.gpuTemplate.
    snap_key: KeyPath = ("vcenter", "templateSnapshot") if field == "template" else key
    prefix = "template" if field == "template" else f"GPU template {name!r}"
    snapshots = template.snapshots
    if len(snapshots) == 1 and snapshots[0] == vc.template_snapshot:
        report.ok(snap_key, f"{prefix} has exactly one snapshot, {vc.template_snapshot!r}")
    elif not snapshots:
        report.blocker(
            snap_key,
            f"{what} {name!r} has no snapshot; linked clones need exactly one, named "
            f"{vc.template_snapshot!r} (take one, or set vm.linkedClone: false; {BUILD_HINT})",
        )
    elif len(snapshots) > 1:
        report.blocker(
            snap_key,
            f"{what} {name!r} has {len(snapshots)} snapshots ({', '.join(snapshots)}); pulumi-vsphere's "
            "linked clone needs exactly one: consolidate them",
        )
    else:
        report.blocker(snap_key, f"{what} {name!r}'s only snapshot is {snapshots[0]!r}, not {vc.template_snapshot!r}")
    return template


def check_templates(env: Environment, inv: Inventory, report: Report) -> None:
    vc = env.vcenter
    template = _one_template(env, inv, report, "template", vc.template)
    if template is not None:
        _report(report, control_plane_template_findings(template_facts_of(template)))
    gpu_template = None
    if vc.gpu_template:
        gpu_template = _one_template(env, inv, report, "gpuTemplate", vc.gpu_template)
    else:
        _report(report, missing_gpu_template_finding(vc.gpu_template))
    if gpu_template is not None:
        findings = gpu_template_findings(
            template_facts_of(gpu_template),
            profiles=env.gpu_workers.vgpu_profiles,
            hardware_version=env.vm.hardware_version,
        )
        _report(report, findings)
        # In gpu-operator mode the operator's own toolkit (its chart pins it) configures containerd.
        if env.gpu.mode == "device-plugin":
            minimum = MINIMUM_NVIDIA_CONTAINER_TOOLKIT
            _report(report, toolkit_findings(template_facts_of(gpu_template), minimum=minimum))
    # The workers clone the GPU template (or, without one, the control plane's).
    workers_template = gpu_template if vc.gpu_template else template
    if workers_template is None or not env.vm.linked_clone:
        return
    template_disk = max(workers_template.disk_gb, default=0.0)
    if template_disk >= 1 and env.gpu_workers.disk_gb > template_disk + 0.5:
        report.warn(
            ("gpuWorkers", "diskGb"),
            f"linked clones keep the template's {template_disk:.0f} GB disk; diskGb {env.gpu_workers.disk_gb} is ignored",
        )
