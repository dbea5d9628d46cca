"""A fresh deployment of dev on the vCenter simulator, told from vCenter's event log.

How the deployment is played: tests/components/vsphere/sim_deploy.py. The harness refuses a vGPU added to a
running VM, so a worker that was never powered off and has its vGPU had it at its first power-on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from stacks.tools.plan.mock_runtime import ProgramRun
from tests.components.vsphere import terraform_vm
from tests.components.vsphere.conftest import CLUSTER_HOSTS, TEMPLATE_VM, _find
from tests.components.vsphere.sim_deploy import Deployment, deployed, events_named, on_the_simulator
from tests.components.vsphere.vm_helpers import clone, destroy, events, reconfigure, unique, vgpu_device_spec, vgpus

pytestmark = pytest.mark.vcsim


@pytest.fixture(scope="module")
def templates(si: Any, vcsim: Any) -> Iterator[dict[str, Any]]:
    """The control plane's template and the GPU workers' (grid_t4-16c device, hardware vmx-21)."""
    if not vcsim.extended:
        pytest.skip("needs the vcsim harness")
    from components.vcenter.tasks import wait_for_task

    base = _find(si, vim.VirtualMachine, TEMPLATE_VM)
    plain = clone(base, unique("rocky9-k8s"))
    gpu = clone(base, unique("rocky9-k8s-vgpu-t4-16c"))
    reconfigure(gpu, deviceChange=[vgpu_device_spec("grid_t4-16c")])
    wait_for_task(gpu.UpgradeVM_Task(version="vmx-21"))
    yield {"plain": plain, "gpu": gpu}
    for vm in (plain, gpu):
        destroy(vm)


@pytest.fixture(scope="module")
def deployment(si: Any, vcsim: Any, templates: dict[str, Any]) -> Iterator[Deployment]:
    edit = on_the_simulator(
        "dev", template=templates["plain"].name, gpu_template=templates["gpu"].name, hosts=CLUSTER_HOSTS
    )
    with deployed(si, vcsim.config(), "dev", edit) as result:
        assert result.error is None, result.error
        yield result


def test_no_gpu_worker_is_ever_powered_off_and_each_has_its_vgpu_from_its_first_power_on(
    si: Any, deployment: Deployment
) -> None:
    # As vCenter showed them right after the deployment: other tests here remove or replace
    # workers, and they run in any order.
    workers = {name: look for name, look in deployment.first_look.items() if name.startswith("gpu-workers-")}
    assert len(workers) == 4
    for name, look in workers.items():
        log = list(look.events)
        assert "off" not in log, f"{name}: {log}"
        assert log.count("on") == 1, f"{name}: {log}"
        assert log[log.index("on") + 1 :] == [], f"{name} was touched after its first power-on: {log}"
        assert look.vgpus == ("grid_t4-16c",)
        assert look.power_state == "poweredOn"
        assert look.reservation_locked is True


def test_the_control_plane_gets_no_vgpu(deployment: Deployment) -> None:
    [master] = [vm for name, vm in deployment.vms.items() if name.startswith("control-plane-")]
    assert vgpus(master) == []
    assert master.runtime.powerState == "poweredOn"


def test_workers_keep_their_templates_newer_hardware_version(deployment: Deployment) -> None:
    """Defect 14.6: dev asks for 19, the GPU template is at 21: pulumi-vsphere would refuse 19."""
    workers = [look for name, look in deployment.first_look.items() if name.startswith("gpu-workers-")]
    assert len(workers) == 4
    for look in workers:
        assert look.hardware_version == "vmx-21"


def test_removing_a_worker_never_powers_it_back_on(si: Any, deployment: Deployment) -> None:
    """Defect 14.7: Pulumi deletes the attachment (the dependent) first, then the VM."""
    name = "gpu-workers-worker-4"
    vm = deployment.vms[name]
    provider, created = deployment.attachments[name]
    vm_name = vm.name
    start = len(events_named(si, vm_name))

    provider.delete(created.id, created.outs)
    terraform_vm.delete(vm)

    # The VM is gone; its events stay in vCenter's log, under its name.
    removal = events_named(si, vm_name)[start:]
    assert removal == ["off"], removal


def test_replacing_a_vm_create_first_is_refused_and_delete_first_works(si: Any, deployment: Deployment) -> None:
    """Defect 14.4: the program replaces VMs delete-first (tests/program/test_gpu_vms.py); this
    is why: vCenter refuses a second VM of the same name in the folder."""
    run: ProgramRun = deployment.run
    resource = run.named("gpu-workers-worker-3")
    inputs = resource.plain_inputs()
    datacenter = next(e for e in si.RetrieveContent().rootFolder.childEntity if isinstance(e, vim.Datacenter))
    pool = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    with pytest.raises(VsphereError, match="DuplicateName"):
        terraform_vm.create(si, inputs, datacenter=datacenter, pool=pool)  # create-before-delete

    terraform_vm.delete(deployment.vms["gpu-workers-worker-3"])
    replacement = terraform_vm.create(si, inputs, datacenter=datacenter, pool=pool)
    deployment.vms["gpu-workers-worker-3"] = replacement
    assert vgpus(replacement) == ["grid_t4-16c"]
    assert "off" not in events(si, replacement)
