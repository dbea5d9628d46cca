"""DvsHostMember against the vCenter simulator, and the harness refusing what vCenter refuses:
taking a host off a distributed switch while its VMkernel adapter is still on it
(vim.fault.ResourceInUse, see vcsim/dvs_hosts.go)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.tasks import wait_for_task
from components.vsphere.dvs_host_member import DvsHostMemberProvider
from components.vsphere.provider_base import RetryPolicy

pytestmark = pytest.mark.vcsim

NO_RETRY = RetryPolicy(attempts=1)


@pytest.fixture
def switch(si: Any, extended: Any) -> Iterator[Any]:
    """A fresh distributed switch with one port group, destroyed after the test."""
    content = si.RetrieveContent()
    datacenter = content.rootFolder.childEntity[0]
    name = f"test-dvs-{time.monotonic_ns() % 1000000}"
    spec = vim.DistributedVirtualSwitch.CreateSpec(
        configSpec=vim.dvs.VmwareDistributedVirtualSwitch.ConfigSpec(name=name)
    )
    dvs = wait_for_task(datacenter.networkFolder.CreateDVS_Task(spec=spec))
    pg_spec = vim.dvs.DistributedVirtualPortgroup.ConfigSpec(name=f"{name}-pg", type="earlyBinding", numPorts=8)
    wait_for_task(dvs.AddDVPortgroup_Task(spec=[pg_spec]))
    yield dvs
    for host in list(dvs.summary.hostMember or []):
        for nic in host.configManager.networkSystem.networkInfo.vnic or []:
            port = nic.spec.distributedVirtualPort
            if port is not None and port.switchUuid == dvs.uuid:
                host.configManager.networkSystem.RemoveVirtualNic(device=nic.device)
    wait_for_task(dvs.Destroy_Task())


@pytest.fixture
def provider(configured: Callable[..., Any]) -> DvsHostMemberProvider:
    return configured(DvsHostMemberProvider(retry=NO_RETRY))


def _inputs(provider: DvsHostMemberProvider, dvs: Any, host_name: str) -> dict[str, Any]:
    checked = provider.check({}, {"host_name": host_name, "switch_uuid": dvs.uuid, "vmnics": ["vmnic4"]})
    assert checked.failures == []
    return checked.inputs


def _members(dvs: Any) -> list[str]:
    return sorted(host.name for host in dvs.summary.hostMember or [])


def _add_vmknic(dvs: Any, host: Any) -> str:
    port_group = dvs.portgroup[0]
    spec = vim.host.VirtualNic.Specification(
        ip=vim.host.IpConfig(dhcp=False, ipAddress="192.168.0.24", subnetMask="255.255.255.0"),
        distributedVirtualPort=vim.dvs.PortConnection(switchUuid=dvs.uuid, portgroupKey=port_group.key),
        mtu=9000,
    )
    return str(host.configManager.networkSystem.AddVirtualNic(portgroup="", nic=spec))


def test_create_adds_the_host_read_sees_it_delete_removes_it(
    provider: DvsHostMemberProvider, switch: Any, host_name: str
) -> None:
    created = provider.create(_inputs(provider, switch, host_name))

    assert _members(switch) == [host_name]
    assert created.outs == {"host_name": host_name, "switch_uuid": switch.uuid, "vmnics": ["vmnic4"]}
    read = provider.read(created.id, created.outs)
    assert read.id == created.id
    assert provider.diff(created.id, read.outs, _inputs(provider, switch, host_name)).changes is False
    assert provider.create(_inputs(provider, switch, host_name)).outs == created.outs  # idempotent

    provider.delete(created.id, created.outs)

    assert _members(switch) == []
    assert provider.read(created.id, created.outs).id == ""


def test_harness_refuses_removing_a_host_whose_vmknic_is_on_the_switch(
    provider: DvsHostMemberProvider, switch: Any, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    host = find(vim.HostSystem, host_name)
    created = provider.create(_inputs(provider, switch, host_name))
    device = _add_vmknic(switch, host)

    # The order the old program produced: the switch changed while the vmknic was attached.
    with pytest.raises(VsphereError) as refused:
        provider.delete(created.id, created.outs)
    assert isinstance(refused.value.fault, vim.fault.ResourceInUse)
    assert "ResourceInUse" in str(refused.value)
    assert _members(switch) == [host_name]

    # The order Pulumi takes now that the vmknic depends on the membership: vmknic first.
    host.configManager.networkSystem.RemoveVirtualNic(device=device)
    provider.delete(created.id, created.outs)
    assert _members(switch) == []



def test_create_adopts_a_member_the_switch_already_has(
    provider: DvsHostMemberProvider, switch: Any, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    # Stacks from before DvsHostMember: the switch resource added its hosts itself. A second
    # "add" would fail (AlreadyExists), so create must see the membership and keep it.
    host = find(vim.HostSystem, host_name)
    member = vim.dvs.HostMember.ConfigSpec(
        operation="add",
        host=host,
        backing=vim.dvs.HostMember.PnicBacking(pnicSpec=[vim.dvs.HostMember.PnicSpec(pnicDevice="vmnic4")]),
    )
    spec = vim.dvs.VmwareDistributedVirtualSwitch.ConfigSpec(configVersion=switch.config.configVersion, host=[member])
    wait_for_task(switch.ReconfigureDvs_Task(spec=spec))

    created = provider.create(_inputs(provider, switch, host_name))

    assert _members(switch) == [host_name]
    provider.delete(created.id, created.outs)
    assert _members(switch) == []
