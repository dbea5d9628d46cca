"""Deploy a stack's VMs on the vCenter simulator the way `pulumi up` would, for the event-log tests.

The real program runs under the SDK's mocks with its template and host lookups answered by the
simulator; then, in Pulumi's order: each host's graphics mode (our provider), every
`VirtualMachine` as pulumi-vsphere creates it (tests/components/vsphere/terraform_vm.py), then each VM's
`VgpuAttachment` (it waits on its VM). Our resources run through the handlers the gpucluster
plugin picks for their type token (provider/kinds.py). The RDMA switch, port group and vmknics are left
out: no VM power step depends on them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyVmomi import vim

from components.resource_handlers import ConfigureRequest
from provider.kinds import HANDLERS
from stacks.tools.plan import mock_runtime
from stacks.tools.plan.mock_runtime import ProgramRun
from stacks.tools.plan.mock_values import fake_invoke_result
from tests.components.vsphere import terraform_vm
from tests.components.vsphere.conftest import _find
from tests.components.vsphere.vm_helpers import destroy, events, unique, vgpus
from tests.program.conftest import edited_view, run_view

VM = "vsphere:index/virtualMachine:VirtualMachine"
VGPU = "gpucluster:vsphere:VgpuAttachment"
GRAPHICS = "gpucluster:vsphere:HostGraphicsMode"
GET_VM = "vsphere:index/getVirtualMachine:getVirtualMachine"
GET_HOST = "vsphere:index/getHost:getHost"


@dataclass(frozen=True)
class VmLook:
    events: tuple[str, ...]
    """Power, guest-shutdown and reconfigure events, oldest first (`vm_helpers.events`)."""
    vgpus: tuple[str, ...]
    power_state: str
    reservation_locked: bool
    hardware_version: str


@dataclass
class Deployment:
    run: ProgramRun
    vms: dict[str, Any] = field(default_factory=dict)
    """By resource name (`gpu-workers-worker-1`)."""
    attachments: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """By the VM's resource name: (provider, CreateResult)."""
    error: BaseException | None = None
    """What stopped the deployment, if something did (as `pulumi up` would report it)."""
    first_look: dict[str, VmLook] = field(default_factory=dict)
    """By resource name: each VM as vCenter showed it right after the deployment, before any test
    changed it (tests of one deployment run in random order, some remove or replace VMs)."""

    def workers(self) -> dict[str, Any]:
        return {name: vm for name, vm in self.vms.items() if name.startswith("gpu-workers-")}


def simulator_lookups(si: Any) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
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


def on_the_simulator(
    stack: str, *, template: str, gpu_template: str, hosts: Sequence[str]
) -> Callable[[dict[str, Any]], None]:
    """An edit of the stack file: the simulator's templates and hosts, a fresh folder and prefix."""

    def edit(env: dict[str, Any]) -> None:
        env["vcenter"]["template"] = template
        env["vcenter"]["gpuTemplate"] = gpu_template
        env["vcenter"]["folder"] = unique(f"gpu-cluster/{stack}")
        env["vm"]["namePrefix"] = unique(f"{stack}-gpu")
        renamed = dict(zip([h["name"] for h in env["hosts"]], hosts, strict=True))
        for host in env["hosts"]:
            host["name"] = renamed[host["name"]]
        for node in env["gpuWorkers"]["nodes"]:
            node["host"] = renamed[node["host"]]

    return edit


def provider_of(resource: Any, config: dict[str, Any]) -> Any:
    """The handlers of the resource's type, configured, as the gpucluster plugin picks them."""
    provider = HANDLERS[resource.type]()
    provider.configure(ConfigureRequest(config))
    return provider


def _public(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in inputs.items() if not k.startswith("__")}


@contextlib.contextmanager
def deployed(
    si: Any, config: dict[str, Any], stack: str, edit: Callable[[dict[str, Any]], None]
) -> Iterator[Deployment]:
    """Deploy the stack's VMs; on exit destroy them and give the hosts' graphics back."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mock_runtime, "fake_invoke_result", simulator_lookups(si))
        deployment = Deployment(run=run_view(edited_view(stack, edit), stack))
    run = deployment.run
    datacenter = next(e for e in si.RetrieveContent().rootFolder.childEntity if isinstance(e, vim.Datacenter))
    pool = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    graphics: list[tuple[Any, Any]] = []
    try:
        try:
            for resource in run.by_type(GRAPHICS):
                provider = provider_of(resource, config)
                checked = provider.check({}, _public(resource.plain_inputs())).inputs
                graphics.append((provider, provider.create(checked)))
            by_urn = {r.urn: r for r in run.by_type(VM)}
            for resource in by_urn.values():
                vm = terraform_vm.create(si, resource.plain_inputs(), datacenter=datacenter, pool=pool)
                deployment.vms[resource.name] = vm
            for resource in run.by_type(VGPU):
                [vm_urn] = [d for d in resource.dependencies if d in by_urn]
                vm = deployment.vms[by_urn[vm_urn].name]
                provider = provider_of(resource, config)
                checked = provider.check({}, {**_public(resource.plain_inputs()), "vm_id": vm.config.uuid}).inputs
                deployment.attachments[by_urn[vm_urn].name] = (provider, provider.create(checked))
        except Exception as exc:  # a failed `pulumi up`: the tests read what it left
            deployment.error = exc
        deployment.first_look = {
            name: VmLook(
                events=tuple(events(si, vm)),
                vgpus=tuple(vgpus(vm)),
                power_state=str(vm.runtime.powerState),
                reservation_locked=bool(vm.config.memoryReservationLockedToMax),
                hardware_version=str(vm.config.version),
            )
            for name, vm in deployment.vms.items()
        }
        yield deployment
    finally:
        for vm in list(deployment.vms.values()):
            with contextlib.suppress(Exception):
                destroy(vm)
        for provider, created in graphics:  # give the hosts back as other tests expect them
            provider.delete(created.id, created.outs)


def events_named(si: Any, name: str) -> list[str]:
    """Power and reconfigure events of the VM called `name`, oldest first (also once it is gone)."""
    spec = vim.event.EventFilterSpec(maxCount=1000)
    kinds = {"VmPoweredOffEvent": "off", "VmPoweredOnEvent": "on", "VmReconfiguredEvent": "reconfig"}
    found = sorted(si.RetrieveContent().eventManager.QueryEvents(spec), key=lambda e: e.key)
    return [
        kinds[type(e).__name__.split(".")[-1]]
        for e in found
        if type(e).__name__.split(".")[-1] in kinds and e.vm is not None and e.vm.name == name
    ]
