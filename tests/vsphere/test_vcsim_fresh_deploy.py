"""A fresh deployment of dev on the vCenter simulator, told from vCenter's event log.

The real program runs under the SDK's mocks with its template and host lookups answered by the
simulator; every `VirtualMachine` it registers is then created as pulumi-vsphere creates it
(tests/vsphere/terraform_vm.py), and every `VgpuAttachment` by our real provider, in the order
Pulumi would (an attachment waits on its VM). The harness refuses a vGPU added to a running VM,
so a worker that was never powered off and has its vGPU had it at its first power-on.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import dill
import pytest
from pulumi.dynamic import Config, ConfigureRequest
from pyVmomi import vim

from stacks import mock_runtime
from stacks.mock_runtime import ProgramRun
from stacks.mock_values import fake_invoke_result
from tests.program.conftest import edited_view, run_view
from tests.vsphere import terraform_vm
from tests.vsphere.conftest import CLUSTER_HOSTS, TEMPLATE_VM, _find
from tests.vsphere.vm_helpers import clone, destroy, events, reconfigure, unique, vgpu_device_spec, vgpus

pytestmark = pytest.mark.vcsim

VM = "vsphere:index/virtualMachine:VirtualMachine"
VGPU = "pulumi-python:dynamic/vsphere:VgpuAttachment"
GET_VM = "vsphere:index/getVirtualMachine:getVirtualMachine"
GET_HOST = "vsphere:index/getHost:getHost"
GRAPHICS = "pulumi-python:dynamic/vsphere:HostGraphicsMode"


@pytest.fixture(scope="module")
def templates(si: Any, vcsim: Any) -> Iterator[dict[str, Any]]:
    """The control plane's template and the GPU workers' (grid_t4-16c device, hardware vmx-21)."""
    if not vcsim.extended:
        pytest.skip("needs the vcsim harness")
    from components.vsphere._vsphere import wait_for_task

    base = _find(si, vim.VirtualMachine, TEMPLATE_VM)
    plain = clone(base, unique("rocky9-k8s"))
    gpu = clone(base, unique("rocky9-k8s-vgpu-t4-16c"))
    reconfigure(gpu, deviceChange=[vgpu_device_spec("grid_t4-16c")])
    wait_for_task(gpu.UpgradeVM_Task(version="vmx-21"))
    yield {"plain": plain, "gpu": gpu}
    for vm in (plain, gpu):
        destroy(vm)


def _simulator_lookups(si: Any) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """Answer the template and host lookups from the simulator, the rest as a plan does."""

    def answer(token: str, args: dict[str, Any]) -> dict[str, Any]:
        result = fake_invoke_result(token, args)
        if token == GET_VM:
            vm = _find(si, vim.VirtualMachine, args["name"])
            version = int(vm.config.version.removeprefix("vmx-"))
            result |= {"id": vm.config.uuid, "hardwareVersion": version, "firmware": vm.config.firmware}
        elif token == GET_HOST:
            result |= {"id": _find(si, vim.HostSystem, args["name"])._moId}
        return result

    return answer


def _dev_on_the_simulator(templates: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def edit(env: dict[str, Any]) -> None:
        env["vcenter"]["template"] = templates["plain"].name
        env["vcenter"]["gpuTemplate"] = templates["gpu"].name
        env["vcenter"]["folder"] = unique("gpu-cluster/dev")
        env["vm"]["namePrefix"] = unique("dev-gpu")
        renamed = dict(zip([h["name"] for h in env["hosts"]], CLUSTER_HOSTS, strict=True))
        for host in env["hosts"]:
            host["name"] = renamed[host["name"]]
        for node in env["gpuWorkers"]["nodes"]:
            node["host"] = renamed[node["host"]]

    return edit


def _provider(resource: Any, vcsim: Any) -> Any:
    """The resource's own provider, unpickled from its `__provider` input and configured, as the
    engine's `pulumi-python` plugin does (pulumi.dynamic.__main__.get_provider)."""
    provider = dill.loads(base64.b64decode(resource.plain_inputs()["__provider"]))
    provider.configure(ConfigureRequest(Config(raw_config=vcsim.config(), project_name="vsphere-gpu-cluster")))
    return provider


def _public(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in inputs.items() if not k.startswith("__")}


@pytest.fixture(scope="module")
def deployment(si: Any, vcsim: Any, templates: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """dev, deployed on the simulator: {"run", "vms" (by resource name), "attachments", ...}.

    In Pulumi's order: each host's graphics mode, then the VMs, then each VM's vGPU attachment
    (it waits on its VM). The RDMA switch, port group and vmknics are left out: no VM power step
    depends on them here.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mock_runtime, "fake_invoke_result", _simulator_lookups(si))
        run: ProgramRun = run_view(edited_view("dev", _dev_on_the_simulator(templates)), "dev")
    datacenter = next(e for e in si.RetrieveContent().rootFolder.childEntity if isinstance(e, vim.Datacenter))
    pool = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    vms: dict[str, Any] = {}
    attachments: dict[str, Any] = {}
    graphics: list[tuple[Any, Any]] = []
    try:
        for resource in run.by_type(GRAPHICS):
            provider = _provider(resource, vcsim)
            checked = provider.check({}, _public(resource.plain_inputs())).inputs
            graphics.append((provider, provider.create(checked)))
        by_urn = {r.urn: r for r in run.by_type(VM)}
        for resource in by_urn.values():
            vms[resource.name] = terraform_vm.create(si, resource.plain_inputs(), datacenter=datacenter, pool=pool)
        for resource in run.by_type(VGPU):
            [vm_urn] = [d for d in resource.dependencies if d in by_urn]
            vm = vms[by_urn[vm_urn].name]
            provider = _provider(resource, vcsim)
            checked = provider.check({}, {**_public(resource.plain_inputs()), "vm_id": vm.config.uuid}).inputs
            attachments[by_urn[vm_urn].name] = (provider, provider.create(checked))
        yield {"run": run, "vms": vms, "attachments": attachments}
    finally:
        for vm in vms.values():
            with contextlib.suppress(Exception):
                destroy(vm)
        for provider, created in graphics:  # give the hosts back as other tests expect them
            provider.delete(created.id, created.outs)


def _workers(deployment: dict[str, Any]) -> dict[str, Any]:
    return {name: vm for name, vm in deployment["vms"].items() if name.startswith("gpu-workers-")}


def test_no_gpu_worker_is_ever_powered_off_and_each_has_its_vgpu_from_its_first_power_on(
    si: Any, deployment: dict[str, Any]
) -> None:
    workers = _workers(deployment)
    assert len(workers) == 4
    for name, vm in workers.items():
        log = events(si, vm)
        assert "off" not in log, f"{name}: {log}"
        assert log.count("on") == 1, f"{name}: {log}"
        assert log[log.index("on") + 1 :] == [], f"{name} was touched after its first power-on: {log}"
        assert vgpus(vm) == ["grid_t4-16c"]
        assert vm.runtime.powerState == "poweredOn"
        assert vm.config.memoryReservationLockedToMax is True


def test_the_control_plane_gets_no_vgpu(deployment: dict[str, Any]) -> None:
    [master] = [vm for name, vm in deployment["vms"].items() if name.startswith("control-plane-")]
    assert vgpus(master) == []
    assert master.runtime.powerState == "poweredOn"


def test_workers_keep_their_templates_newer_hardware_version(deployment: dict[str, Any]) -> None:
    """Defect 14.6: dev asks for 19, the GPU template is at 21: pulumi-vsphere would refuse 19."""
    for vm in _workers(deployment).values():
        assert vm.config.version == "vmx-21"


def test_removing_a_worker_never_powers_it_back_on(si: Any, deployment: dict[str, Any]) -> None:
    """Defect 14.7: Pulumi deletes the attachment (the dependent) first, then the VM."""
    name = "gpu-workers-worker-4"
    vm = deployment["vms"][name]
    provider, created = deployment["attachments"][name]
    vm_name = vm.name
    start = len(_events_named(si, vm_name))

    provider.delete(created.id, created.outs)
    terraform_vm.delete(vm)

    # The VM is gone; its events stay in vCenter's log, under its name.
    removal = _events_named(si, vm_name)[start:]
    assert removal == ["off"], removal


def _events_named(si: Any, name: str) -> list[str]:
    spec = vim.event.EventFilterSpec(maxCount=1000)
    kinds = {"VmPoweredOffEvent": "off", "VmPoweredOnEvent": "on", "VmReconfiguredEvent": "reconfig"}
    found = sorted(si.RetrieveContent().eventManager.QueryEvents(spec), key=lambda e: e.key)
    return [
        kinds[type(e).__name__.split(".")[-1]]
        for e in found
        if type(e).__name__.split(".")[-1] in kinds and e.vm is not None and e.vm.name == name
    ]


def test_replacing_a_vm_create_first_is_refused_and_delete_first_works(si: Any, deployment: dict[str, Any]) -> None:
    """Defect 14.4: the program replaces VMs delete-first (tests/program/test_gpu_vms.py); this
    is why: vCenter refuses a second VM of the same name in the folder."""
    run: ProgramRun = deployment["run"]
    resource = run.named("gpu-workers-worker-3")
    inputs = resource.plain_inputs()
    datacenter = next(e for e in si.RetrieveContent().rootFolder.childEntity if isinstance(e, vim.Datacenter))
    pool = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    from components.vsphere._vsphere import VsphereError

    with pytest.raises(VsphereError, match="DuplicateName"):
        terraform_vm.create(si, inputs, datacenter=datacenter, pool=pool)  # create-before-delete

    terraform_vm.delete(deployment["vms"]["gpu-workers-worker-3"])
    replacement = terraform_vm.create(si, inputs, datacenter=datacenter, pool=pool)
    deployment["vms"]["gpu-workers-worker-3"] = replacement
    assert vgpus(replacement) == ["grid_t4-16c"]
    assert "off" not in events(si, replacement)
