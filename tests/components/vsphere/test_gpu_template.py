"""The GPU template checks preflight can run: a table of facts, and facts read from the simulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.tasks import wait_for_task
from components.vsphere.gpu_template import (
    TemplateFacts,
    control_plane_template_findings,
    gpu_template_findings,
    missing_gpu_template_finding,
    toolkit_findings,
)
from components.vsphere.vgpu.devices import template_facts
from tests.components.vsphere.conftest import TEMPLATE_VM
from tests.components.vsphere.vm_helpers import clone, destroy, reconfigure, unique, vgpu_device_spec

MMIO = {"pciPassthru.use64bitMMIO": "TRUE", "pciPassthru.64bitMMIOSizeGB": "128"}


def _levels(findings: list[Any]) -> list[tuple[str, str]]:
    return [(f.level, f.key) for f in findings]


@pytest.mark.parametrize(
    ("facts", "profiles", "expected", "says"),
    [
        (TemplateFacts("t4", ("grid_t4-16c",), "efi", 19), ["grid_t4-16c"], [("OK", "vcenter.gpuTemplate")], "carries"),
        (TemplateFacts("bare", (), "efi", 19), ["grid_t4-16c"], [("BLOCKER", "vcenter.gpuTemplate")], "no vGPU device"),
        (
            TemplateFacts("t4", ("grid_t4-8c",), "efi", 19),
            ["grid_t4-16c"],
            [("BLOCKER", "vcenter.gpuTemplate")],
            "carries grid_t4-8c, gpuWorkers.vgpuProfiles asks for grid_t4-16c",
        ),
        (
            TemplateFacts("a100", ("grid_a100-40c",), "efi", 19, MMIO),
            ["grid_a100-40c"],
            [("OK", "vcenter.gpuTemplate")],
            "",
        ),
        (
            TemplateFacts("a100", ("grid_a100-40c",), "bios", 19, MMIO),
            ["grid_a100-40c"],
            [("BLOCKER", "vcenter.gpuTemplate")],
            "firmware is bios, not efi",
        ),
        (
            TemplateFacts("a100", ("grid_a100-40c",), "efi", 19, {"pciPassthru.use64bitMMIO": "TRUE"}),
            ["grid_a100-40c"],
            [("BLOCKER", "vcenter.gpuTemplate")],
            "pciPassthru.64bitMMIOSizeGB is unset, needs 128",
        ),
        (
            TemplateFacts("t4", ("grid_t4-16c",), "efi", 21),
            ["grid_t4-16c"],
            [("WARN", "vm.hardwareVersion")],
            "the clones keep 21",
        ),
    ],
)
def test_gpu_template_findings(facts: TemplateFacts, profiles: list[str], expected: list[Any], says: str) -> None:
    findings = gpu_template_findings(facts, profiles=profiles, hardware_version=19)
    assert _levels(findings) == expected
    assert says in " ".join(f.message for f in findings)


def test_control_plane_template_must_carry_no_vgpu() -> None:
    assert _levels(control_plane_template_findings(TemplateFacts("plain"))) == [("OK", "vcenter.template")]
    [finding] = control_plane_template_findings(TemplateFacts("gpu", ("grid_t4-16c",)))
    assert (finding.level, finding.key) == ("BLOCKER", "vcenter.template")
    assert "vcenter.gpuTemplate" in finding.message


def test_an_unset_gpu_template_is_a_blocker() -> None:
    assert missing_gpu_template_finding("rocky9-k8s-vgpu-t4-16c") == []
    assert _levels(missing_gpu_template_finding(None)) == [("BLOCKER", "vcenter.gpuTemplate")]


@pytest.mark.vcsim
def test_facts_are_read_from_a_template_in_vcenter(find: Callable[[Any, str], Any], extended: Any) -> None:
    template = clone(find(vim.VirtualMachine, TEMPLATE_VM), unique("facts"))
    try:
        options = [vim.option.OptionValue(key=k, value=v) for k, v in MMIO.items()]
        reconfigure(template, firmware="efi", extraConfig=options, deviceChange=[vgpu_device_spec("grid_a100-40c")])
        wait_for_task(template.UpgradeVM_Task(version="vmx-20"))

        facts = template_facts(template)

        assert facts.vgpu_profiles == ("grid_a100-40c",)
        assert (facts.firmware, facts.hardware_version) == ("efi", 20)
        assert {k: facts.extra_config[k] for k in MMIO} == MMIO
        assert _levels(gpu_template_findings(facts, profiles=["grid_a100-40c"], hardware_version=20)) == [
            ("OK", "vcenter.gpuTemplate")
        ]
    finally:
        destroy(template)


@pytest.mark.parametrize(
    ("recorded", "level", "says"),
    [
        ("1.17.7", "BLOCKER", "NVIDIA Container Toolkit 1.17.7, older than 1.17.8"),
        ("1.9.12", "BLOCKER", "NVIDIA Container Toolkit 1.9.12, older than 1.17.8"),
        ("1.17.8", "OK", "NVIDIA Container Toolkit 1.17.8"),
        ("1.17.10", "OK", "NVIDIA Container Toolkit 1.17.10"),
        ("1.18.0-1", "OK", "NVIDIA Container Toolkit 1.18.0-1"),
        (None, "WARN", "does not record its NVIDIA Container Toolkit version"),
        ("latest", "WARN", "not a version"),
    ],
)
def test_toolkit_findings_refuse_a_toolkit_before_the_cve_2025_23266_fix(
    recorded: str | None, level: str, says: str
) -> None:
    extra = {} if recorded is None else {"gpucluster.nvidiaContainerToolkitVersion": recorded}
    [finding] = toolkit_findings(TemplateFacts("t4", ("grid_t4-16c",), "efi", 19, extra), minimum="1.17.8")
    assert (finding.level, finding.key) == (level, "vcenter.gpuTemplate")
    assert says in finding.message
