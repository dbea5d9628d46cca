"""staging (8 A100 workers, grid_a100-40c) deployed on a simulator whose hosts offer A100 vGPUs.

Defect 14.5 end to end: a large-BAR vGPU VM powers on only with EFI and 64-bit MMIO (the harness
refuses it otherwise, as vCenter does, citing VMware KB 2142307). A GPU template prepared as
docs/rdma-host-settings.md says gives every worker its vGPU and MMIO at first power-on; one
without MMIO stops at the first worker's power-on, and the preflight check names it first.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.tasks import wait_for_task
from components.vsphere.gpu_template import gpu_template_findings
from components.vsphere.vgpu.devices import template_facts
from tests.components.vsphere.conftest import HARNESS, TEMPLATE_VM, Vcsim, _find, _start
from tests.components.vsphere.sim_deploy import deployed, on_the_simulator
from tests.components.vsphere.vm_helpers import clone, destroy, events, reconfigure, unique, vgpu_device_spec, vgpus

pytestmark = pytest.mark.vcsim

HOSTS = [f"DC0_C0_H{i}" for i in range(8)]
MMIO = {"pciPassthru.use64bitMMIO": "TRUE", "pciPassthru.64bitMMIOSizeGB": "128"}


@pytest.fixture(scope="module")
def a100_vcsim(vcsim: Vcsim) -> Iterator[Vcsim]:
    """A second harness: 8 cluster hosts offering A100 vGPU profiles."""
    if not vcsim.extended:
        pytest.skip("needs the vcsim harness")
    command = [str(HARNESS), "-port", "0", "-exit-on-stdin-eof", "-host", "8"]
    process, url = _start(
        [*command, "-vgpu-profiles", "grid_a100-10c,grid_a100-20c,grid_a100-40c"], prefixes=("VCSIM_URL=",)
    )
    sim = Vcsim(url=url, extended=True, process=process)
    yield sim
    if process.stdin is not None:
        process.stdin.close()
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def a100_si(a100_vcsim: Vcsim) -> Iterator[Any]:
    service = SmartConnect(
        protocol="http", host="127.0.0.1", port=a100_vcsim.port, user=a100_vcsim.user, pwd=a100_vcsim.password
    )
    yield service
    Disconnect(service)


@pytest.fixture
def templates(a100_si: Any) -> Iterator[dict[str, Any]]:
    base = _find(a100_si, vim.VirtualMachine, TEMPLATE_VM)
    plain = clone(base, unique("rocky9-k8s"))
    made = [plain]
    yield {"plain": plain, "made": made}
    for vm in made:
        with contextlib.suppress(Exception):
            destroy(vm)


def _gpu_template(si: Any, templates: dict[str, Any], *, firmware: str, mmio: dict[str, str]) -> Any:
    gpu = clone(_find(si, vim.VirtualMachine, TEMPLATE_VM), unique("rocky9-k8s-vgpu-a100-40c"))
    templates["made"].append(gpu)
    options = [vim.option.OptionValue(key=k, value=v) for k, v in mmio.items()]
    reconfigure(gpu, firmware=firmware, extraConfig=options, deviceChange=[vgpu_device_spec("grid_a100-40c")])
    wait_for_task(gpu.UpgradeVM_Task(version="vmx-19"))
    return gpu


def test_staging_workers_power_on_once_with_their_a100_vgpu_and_64bit_mmio(
    a100_si: Any, a100_vcsim: Vcsim, templates: dict[str, Any]
) -> None:
    gpu = _gpu_template(a100_si, templates, firmware="efi", mmio=MMIO)
    facts = template_facts(gpu)
    assert [f.level for f in gpu_template_findings(facts, profiles=["grid_a100-40c"], hardware_version=19)] == ["OK"]
    edit = on_the_simulator("staging", template=templates["plain"].name, gpu_template=gpu.name, hosts=HOSTS)

    with deployed(a100_si, a100_vcsim.config(), "staging", edit) as deployment:
        assert deployment.error is None, deployment.error
        workers = deployment.workers()
        assert len(workers) == 8
        for name, vm in workers.items():
            log = events(a100_si, vm)
            assert "off" not in log and log.count("on") == 1, f"{name}: {log}"
            assert vgpus(vm) == ["grid_a100-40c"]
            assert vm.config.firmware == "efi"
            extra = {o.key: o.value for o in vm.config.extraConfig}
            assert {k: extra[k] for k in MMIO} == MMIO
        for _, created in deployment.attachments.values():
            assert created.outs["extra_config"] == MMIO  # verified, nothing to change


def test_a_gpu_template_without_64bit_mmio_is_named_by_preflight_and_refused_by_vcenter(
    a100_si: Any, a100_vcsim: Vcsim, templates: dict[str, Any]
) -> None:
    gpu = _gpu_template(a100_si, templates, firmware="efi", mmio={})
    [finding] = gpu_template_findings(template_facts(gpu), profiles=["grid_a100-40c"], hardware_version=19)
    assert (finding.level, finding.key) == ("BLOCKER", "vcenter.gpuTemplate")
    edit = on_the_simulator("staging", template=templates["plain"].name, gpu_template=gpu.name, hosts=HOSTS)

    with deployed(a100_si, a100_vcsim.config(), "staging", edit) as deployment:
        assert isinstance(deployment.error, VsphereError)
        assert "needs 64-bit MMIO (VMware KB 2142307)" in str(deployment.error)
        assert deployment.workers() == {}  # the first worker's create failed at its power-on
        # The first worker in Pulumi's order: cloned, reconfigured, refused at power-on.
        first = next(
            r
            for r in deployment.run.by_type("vsphere:index/virtualMachine:VirtualMachine")
            if r.name.startswith("gpu-workers-")
        )
        failed = [_find(a100_si, vim.VirtualMachine, first.plain_inputs()["name"])]
        templates["made"].extend(failed)
        assert [vm.runtime.powerState for vm in failed] == ["poweredOff"]
        assert "on" not in events(a100_si, failed[0])
