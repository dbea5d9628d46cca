"""DvsHostMember against the vCenter simulator, and the harness refusing what vCenter refuses:
taking a host off a distributed switch while its VMkernel adapter is still on it
(vim.fault.ResourceInUse, see vcsim/dvs_hosts.go), a reconfigure of a switch while another one
runs (vim.fault.DvsOperationBulkFault) and a spec with a stale configVersion
(vim.fault.ConcurrentAccess, see vcsim/dvs_reconfigure.go)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.tasks import wait_for_task
from components.vsphere.dvs_host_member import DvsHostMemberProvider
from components.vsphere.provider_base import RetryPolicy
from tests.components.vsphere.conftest import CLUSTER_HOSTS

pytestmark = pytest.mark.vcsim

NO_RETRY = RetryPolicy(attempts=1)
#: The provider's own backoff, only faster: the harness holds a reconfigure for 0.3 s.
QUICK_RETRY = RetryPolicy(attempts=6, base_delay=0.2, max_delay=1.0, max_total=30.0)


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


def _member_spec(dvs: Any, host: Any, *, config_version: str) -> Any:
    member = vim.dvs.HostMember.ConfigSpec(
        operation="add",
        host=host,
        backing=vim.dvs.HostMember.PnicBacking(pnicSpec=[vim.dvs.HostMember.PnicSpec(pnicDevice="vmnic4")]),
    )
    return vim.dvs.VmwareDistributedVirtualSwitch.ConfigSpec(configVersion=config_version, host=[member])


def test_harness_refuses_a_stale_config_version_and_an_overlapping_reconfigure(
    switch: Any, find: Callable[[Any, str], Any]
) -> None:
    first, second = (find(vim.HostSystem, name) for name in CLUSTER_HOSTS[:2])
    version = switch.config.configVersion

    running = switch.ReconfigureDvs_Task(spec=_member_spec(switch, first, config_version=version))
    overlapping = switch.ReconfigureDvs_Task(spec=_member_spec(switch, second, config_version=version))
    with pytest.raises(VsphereError) as busy:
        wait_for_task(overlapping)
    assert isinstance(busy.value.fault, vim.fault.DvsOperationBulkFault)
    assert "one or more host members" in str(busy.value)
    wait_for_task(running)

    # The version the second client read is stale now.
    assert switch.config.configVersion != version
    with pytest.raises(VsphereError) as stale:
        wait_for_task(switch.ReconfigureDvs_Task(spec=_member_spec(switch, second, config_version=version)))
    assert isinstance(stale.value.fault, vim.fault.ConcurrentAccess)
    assert _members(switch) == [first.name]


def test_members_created_in_parallel_all_join_the_switch(configured: Callable[..., Any], switch: Any) -> None:
    # The engine runs the members' creates at once, each with a provider of its own, in one
    # provider process (the Python dynamic provider serves 4 threads). No retries: the members
    # must take turns in the process rather than collide and back off.
    providers = [configured(DvsHostMemberProvider(retry=NO_RETRY)) for _ in CLUSTER_HOSTS]
    start = threading.Barrier(len(CLUSTER_HOSTS))

    def create(index: int) -> Any:
        provider, host_name = providers[index], CLUSTER_HOSTS[index]
        inputs = _inputs(provider, switch, host_name)
        start.wait()
        return provider.create(inputs)

    with ThreadPoolExecutor(max_workers=len(CLUSTER_HOSTS)) as pool:
        created = list(pool.map(create, range(len(CLUSTER_HOSTS))))

    assert _members(switch) == sorted(CLUSTER_HOSTS)
    for provider, result in zip(providers, created, strict=True):
        provider.delete(result.id, result.outs)
    assert _members(switch) == []


def test_create_waits_out_a_reconfigure_started_elsewhere(
    configured: Callable[..., Any], switch: Any, find: Callable[[Any, str], Any]
) -> None:
    # Another client (an admin, another stack) reconfigures the switch: the provider's first
    # attempt meets DvsOperationBulkFault, a retry reads the new configVersion and succeeds.
    other = find(vim.HostSystem, CLUSTER_HOSTS[1])
    elsewhere = switch.ReconfigureDvs_Task(spec=_member_spec(switch, other, config_version=switch.config.configVersion))
    provider = configured(DvsHostMemberProvider(retry=QUICK_RETRY))

    created = provider.create(_inputs(provider, switch, CLUSTER_HOSTS[0]))

    wait_for_task(elsewhere)
    assert _members(switch) == sorted(CLUSTER_HOSTS[:2])
    provider.delete(created.id, created.outs)


def test_members_deleted_in_parallel_all_leave_the_switch(configured: Callable[..., Any], switch: Any) -> None:
    # The engine deletes the members of one switch at once too (every host leaves the stack, or
    # `pulumi destroy`). No retries: without the per-switch lock on the delete path, the harness
    # refuses the overlapping reconfigures (DvsOperationBulkFault) and all but one fail.
    providers = [configured(DvsHostMemberProvider(retry=NO_RETRY)) for _ in CLUSTER_HOSTS]
    created = [
        provider.create(_inputs(provider, switch, host_name))
        for provider, host_name in zip(providers, CLUSTER_HOSTS, strict=True)
    ]
    assert _members(switch) == sorted(CLUSTER_HOSTS)
    start = threading.Barrier(len(CLUSTER_HOSTS))

    def delete(index: int) -> None:
        start.wait()
        providers[index].delete(created[index].id, created[index].outs)

    with ThreadPoolExecutor(max_workers=len(CLUSTER_HOSTS)) as pool:
        list(pool.map(delete, range(len(CLUSTER_HOSTS))))

    assert _members(switch) == []
