"""What `plan` says about the GPU workers' template: the vGPU devices, firmware and 64-bit MMIO size
each worker is cloned with (components/vsphere/gpu_template.py `gpu_template_build`), so the Packer
build (templates/packer/gpu `vgpu_profiles`, `mmio_size_gb`) can be given the same values."""

from __future__ import annotations

from typing import Any

from components.vsphere.gpu_template import gpu_template_build
from stacks.environment.model import Environment


def gpu_template_note(env: Environment) -> dict[str, Any]:
    """The GPU workers' template as `plan --json` gives it."""
    name = env.vcenter.gpu_template or env.vcenter.template
    profiles = list(env.gpu_workers.vgpu_profiles)  # at least one (the model's min_length)
    build = gpu_template_build(profiles)
    return {
        "template": name,
        "vgpuProfiles": profiles,
        "firmware": build.firmware,
        "mmioSizeGb": build.mmio_size_gb,
        "summary": build.summary(),
    }


def gpu_template_lines(env: Environment) -> list[str]:
    """One line per worker template (every GPU worker clones `vcenter.gpuTemplate`)."""
    note = gpu_template_note(env)
    workers = len(env.gpu_workers.nodes)
    return [f"GPU worker template {note['template']} ({workers} GPU worker(s) cloned from it): {note['summary']}"]
