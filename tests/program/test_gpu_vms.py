"""GPU worker VMs as the program registers them: the template they are cloned from (vGPU at
birth), replacement order, 64-bit MMIO for large-BAR vGPUs, the hardware version, and every
NodePool option documented."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.vsphere import node_pool
from components.vsphere.vgpu.profiles import mmio_size_gb, needs_64bit_mmio, parse_profile, vgpu_extra_config
from stacks.environment.loader import InvalidEnvironment, load_environment
from stacks.tools.plan import mock_runtime
from stacks.tools.plan.mock_runtime import ProgramRun, RecordedResource
from stacks.tools.plan.mock_values import fake_invoke_result
from tests.program.conftest import edited_view, run_view

VM = "vsphere:index/virtualMachine:VirtualMachine"
VGPU = "gpucluster:vsphere:VgpuAttachment"
GET_VM = "vsphere:index/getVirtualMachine:getVirtualMachine"


def _pool_vms(run: ProgramRun, pool: str) -> list[RecordedResource]:
    parent = run.named(pool).urn
    return [r for r in run.by_type(VM) if r.parent == parent]


def _template_uuid(name: str) -> str:
    return str(fake_invoke_result(GET_VM, {"name": name})["id"])


def test_workers_clone_from_the_gpu_template_and_the_control_plane_from_the_plain_one(dev_run: ProgramRun) -> None:
    for vm in _pool_vms(dev_run, "gpu-workers"):
        assert vm.plain_inputs()["clone"]["templateUuid"] == _template_uuid("rocky9-k8s-vgpu-t4-16c")
    for vm in _pool_vms(dev_run, "control-plane"):
        assert vm.plain_inputs()["clone"]["templateUuid"] == _template_uuid("rocky9-k8s-gpu-template")


def test_without_a_gpu_template_workers_clone_from_the_template() -> None:
    run = run_view(edited_view("dev", lambda env: env["vcenter"].pop("gpuTemplate")), "dev")
    for vm in _pool_vms(run, "gpu-workers"):
        assert vm.plain_inputs()["clone"]["templateUuid"] == _template_uuid("rocky9-k8s-gpu-template")


def test_every_vm_is_replaced_delete_first(dev_run: ProgramRun, prod_run: ProgramRun) -> None:
    """Defect 14.4: a replacement made the new VM first, with the old one's name (vCenter:
    DuplicateName), MACs and addresses."""
    for run in (dev_run, prod_run):
        vms = run.by_type(VM)
        assert vms
        assert all(vm.delete_before_replace for vm in vms), [vm.name for vm in vms if not vm.delete_before_replace]


def test_large_bar_vgpus_get_64bit_mmio_and_t4_gets_none(dev_run: ProgramRun, prod_run: ProgramRun) -> None:
    """Defect 14.5: A100 vGPU VMs had no 64-bit MMIO, and nothing could add it later."""
    for attachment in dev_run.by_type(VGPU):
        assert attachment.plain_inputs()["extra_config"] == {}
    for attachment in prod_run.by_type(VGPU):
        assert attachment.plain_inputs()["extra_config"] == {
            "pciPassthru.use64bitMMIO": "TRUE",
            "pciPassthru.64bitMMIOSizeGB": "128",
        }


@pytest.mark.parametrize(
    ("profiles", "board", "needs", "size"),
    [
        (["grid_t4-16c"], "t4", False, 32),
        (["grid_a100-40c"], "a100", True, 128),
        (["grid_a100-3-20c"], "a100", True, 64),
        (["grid_a100-40c", "grid_a100-40c"], "a100", True, 256),
        (["grid_a40-48c"], "a40", True, 128),
        (["grid_h100-80c"], "h100", True, 256),
    ],
)
def test_mmio_sizing(profiles: list[str], board: str, needs: bool, size: int) -> None:
    assert parse_profile(profiles[0]).board == board
    assert needs_64bit_mmio(profiles) is needs
    assert mmio_size_gb(profiles) == size
    assert vgpu_extra_config(profiles) == (
        {"pciPassthru.use64bitMMIO": "TRUE", "pciPassthru.64bitMMIOSizeGB": str(size)} if needs else {}
    )


def _with_template_version(version: int) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    def answer(token: str, args: dict[str, Any]) -> dict[str, Any]:
        result = fake_invoke_result(token, args)
        return {**result, "hardwareVersion": version} if token == GET_VM else result

    return answer


@pytest.mark.parametrize(("template", "configured", "expected"), [(21, 19, 21), (17, 19, 19), (19, 20, 20)])
def test_a_newer_template_keeps_its_hardware_version(template: int, configured: int, expected: int) -> None:
    """Defect 14.6: version 19 asked of a clone of a vmx-21 template is a downgrade, refused."""

    def edit(env: dict[str, Any]) -> None:
        env["vm"]["hardwareVersion"] = configured

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mock_runtime, "fake_invoke_result", _with_template_version(template))
        run = run_view(edited_view("dev", edit), "dev")
    versions = {vm.name: vm.plain_inputs()["hardwareVersion"] for vm in run.by_type(VM)}
    assert set(versions.values()) == {expected}, versions


def test_every_node_pool_option_says_what_it_does() -> None:
    """Issue 20: each NodePoolArgs field has a docstring; those with a default name it."""
    tree = ast.parse(Path(inspect.getfile(node_pool)).read_text())
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "NodePoolArgs"]
    undocumented, default_unnamed = [], []
    for statement, following in zip(cls.body, [*cls.body[1:], None], strict=True):
        if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
            continue
        doc = (
            following.value.value
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
            else None
        )
        if not isinstance(doc, str):
            undocumented.append(statement.target.id)
        elif statement.value is not None and "default" not in doc.lower():
            default_unnamed.append(statement.target.id)
    assert undocumented == []
    assert default_unnamed == []


def test_the_gpu_template_cannot_be_the_control_planes() -> None:
    def same(env: dict[str, Any]) -> None:
        env["vcenter"]["gpuTemplate"] = env["vcenter"]["template"]

    with pytest.raises(InvalidEnvironment) as info:
        load_environment(edited_view("dev", same))
    assert any(
        p.endswith(
            "environment.vcenter.gpuTemplate: is vcenter.template; the GPU template carries the workers' vGPU device, which control-plane clones must not get (they reserve no memory and would not power on): name a separate template"
        )
        for p in info.value.problems
    ), info.value
