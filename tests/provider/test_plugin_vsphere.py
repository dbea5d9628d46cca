"""The vSphere kinds through the gpucluster plugin's own process, against the vCenter simulator:
Configure with the simulator's credentials (the password a secret), then Check, Create, Read,
Diff and Delete as the engine calls them, and switch joins batched into one ReconfigureDvs_Task."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from pyVmomi import vim

from components.vcenter.tasks import wait_for_task
from tests.components.vsphere.conftest import CLUSTER_HOSTS, TEMPLATE_VM, _find
from tests.components.vsphere.vm_helpers import clone, destroy, unique, vgpus
from tests.provider.plugin_process import Plugin, configure, running_plugin
from tests.provider.rpc import Lifecycle, no_change

pytestmark = pytest.mark.vcsim

MEMBER = "gpucluster:vsphere:DvsHostMember"
PVRDMA = "gpucluster:vsphere:PvrdmaHostSettings"
VGPU = "gpucluster:vsphere:VgpuAttachment"
REPLICA = "gpucluster:vsphere:TemplateReplica"
RDMA_NET = "192.168.50.0/24"


@pytest.fixture
def switch(si: Any) -> Iterator[Any]:
    """A fresh distributed switch with one port group, destroyed after the test."""
    datacenter = si.RetrieveContent().rootFolder.childEntity[0]
    name = unique("plugin-dvs")
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


def _members(dvs: Any) -> list[str]:
    return sorted(host.name for host in dvs.summary.hostMember or [])


def _version(dvs: Any) -> int:
    """configVersion moves on by one per applied ReconfigureDvs_Task (vcsim/dvs_reconfigure.go)."""
    return int(dvs.config.configVersion or 0)  # a new switch has none yet: the harness counts from 0


def _all_at_once(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run the calls in parallel, as the engine runs independent steps; exceptions are returned."""

    def guarded(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except grpc.RpcError as exc:
            return exc

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(guarded, calls))


def test_hosts_joining_together_go_in_one_reconfigure_and_leave_in_one(vsphere_plugin: Plugin, switch: Any) -> None:
    members = {host: Lifecycle(vsphere_plugin.stub, MEMBER, f"rdma-member-{host}") for host in CLUSTER_HOSTS}
    inputs = {
        host: member.checked({"host_name": host, "switch_uuid": switch.uuid, "vmnics": ["vmnic4"]})
        for host, member in members.items()
    }
    before = _version(switch)

    created = _all_at_once([lambda h=h, m=m: m.create(inputs[h]) for h, m in members.items()])

    assert [c for c in created if isinstance(c, Exception)] == []
    assert _members(switch) == sorted(CLUSTER_HOSTS)
    assert _version(switch) == before + 1  # four joins, one ReconfigureDvs_Task
    for (host, member), (id_, outs, _) in zip(members.items(), created, strict=True):
        assert id_ == f"{switch.uuid}:{host}"
        assert outs == {"host_name": host, "switch_uuid": switch.uuid, "vmnics": ["vmnic4"]}
        read_id, read = member.read(id_, outs)
        assert (read_id, read) == (id_, outs)
        assert no_change(member.diff(id_, read, inputs[host]))

    left = _all_at_once([lambda m=m, c=c: m.delete(c[0], c[1]) for m, c in zip(members.values(), created, strict=True)])

    assert [r for r in left if isinstance(r, Exception)] == []
    assert _members(switch) == []
    assert _version(switch) == before + 2


def test_a_host_that_cannot_leave_fails_alone_with_its_own_reason(
    vsphere_plugin: Plugin, switch: Any, find: Callable[[Any, str], Any]
) -> None:
    """Issue 43 items 4 and 5: the leaves of two hosts go in one task, and vCenter refuses it
    because one host still has a vmknic on the switch (ResourceInUse). The batch is split: the
    other host leaves, and the refused one's error names it, not the whole batch."""
    hosts = CLUSTER_HOSTS[:2]
    members = [Lifecycle(vsphere_plugin.stub, MEMBER, f"rdma-member-{host}") for host in hosts]
    props = [{"host_name": host, "switch_uuid": switch.uuid, "vmnics": ["vmnic4"]} for host in hosts]
    created = _all_at_once([lambda m=m, p=p: m.create(p) for m, p in zip(members, props, strict=True)])
    # The first host's vmknic on the switch: vCenter refuses to take that host off (ResourceInUse).
    host = find(vim.HostSystem, hosts[0])
    nic = vim.host.VirtualNic.Specification(
        ip=vim.host.IpConfig(dhcp=False, ipAddress="192.168.0.24", subnetMask="255.255.255.0"),
        distributedVirtualPort=vim.dvs.PortConnection(switchUuid=switch.uuid, portgroupKey=switch.portgroup[0].key),
    )
    device = host.configManager.networkSystem.AddVirtualNic(portgroup="", nic=nic)

    refused, left = _all_at_once([lambda m=m, c=c: m.delete(c[0], c[1]) for m, c in zip(members, created, strict=True)])

    assert isinstance(refused, grpc.RpcError), refused
    assert "ResourceInUse" in refused.details() and hosts[0] in refused.details(), refused.details()
    assert hosts[1] not in refused.details() and "batch of" not in refused.details()
    assert left is None
    assert _members(switch) == [hosts[0]]

    host.configManager.networkSystem.RemoveVirtualNic(device=device)
    members[0].delete(*created[0][:2])
    assert _members(switch) == []


def _pvrdma_state(find: Callable[[Any, str], Any], name: str) -> tuple[str, bool]:
    host = find(vim.HostSystem, name)
    option = host.configManager.advancedOption.QueryOptions("Net.PVRDMAVmknic")[0].value
    enabled = next(r.enabled for r in host.configManager.firewallSystem.firewallInfo.ruleset if r.key == "pvrdma")
    return option, enabled


def test_pvrdma_host_settings_lifecycle(
    vsphere_plugin: Plugin, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    settings = Lifecycle(vsphere_plugin.stub, PVRDMA, f"rdma-pvrdma-{host_name}")
    refused = settings.check({"host_name": host_name, "vmknic_device": "eth0", "allowed_network": RDMA_NET})
    assert [f.property for f in refused.failures] == ["vmknic_device"]
    inputs = settings.checked({"host_name": f" {host_name} ", "vmknic_device": "vmk1", "allowed_network": RDMA_NET})

    id_, outs, _ = settings.create(inputs)

    assert id_ == f"pvrdma:{host_name}"
    assert _pvrdma_state(find, host_name) == ("vmk1", True)
    assert outs["previous_vmknic"] == "" and outs["ruleset_enabled"] is True
    assert (outs["allowed_all_ip"], outs["allowed_hosts"]) == (False, [RDMA_NET])
    read_id, read = settings.read(id_, outs)
    assert (read_id, read) == (id_, outs)
    assert no_change(settings.diff(id_, read, inputs))
    settings.delete(id_, outs)
    assert _pvrdma_state(find, host_name) == ("", False)  # put back as it was


def test_vgpu_attachment_lifecycle(vsphere_plugin: Plugin, extended: Any, si: Any) -> None:
    vm = clone(_find(si, vim.VirtualMachine, TEMPLATE_VM), unique("plugin-vgpu"))
    try:
        attachment = Lifecycle(vsphere_plugin.stub, VGPU, "gpu-workers-w1-vgpu")
        inputs = attachment.checked(
            {"vm_id": vm.config.uuid, "vm_name": vm.name, "profiles": ["grid_t4-4c"], "extra_config": {}}
        )

        id_, outs, _ = attachment.create(inputs)

        assert id_ == f"vgpu:{vm.config.uuid}"
        assert vgpus(vm) == ["grid_t4-4c"]
        assert outs["profiles"] == ["grid_t4-4c"] and outs["power_state"] == "poweredOff"
        read_id, read = attachment.read(id_, outs)
        assert read_id == id_ and read["profiles"] == ["grid_t4-4c"]
        assert no_change(attachment.diff(id_, read, inputs))
        changed = attachment.diff(id_, read, {**inputs, "profiles": ["grid_t4-8c"]})
        assert changed.changes == changed.DIFF_SOME
        attachment.delete(id_, outs)
        assert vgpus(vm) == []
    finally:
        destroy(vm)


@pytest.fixture
def gold(si: Any) -> Iterator[Any]:
    """A template with one snapshot `base`, what vcenter.gpuTemplate names with linked clones."""
    template = clone(_find(si, vim.VirtualMachine, TEMPLATE_VM), unique("plugin-gold"))
    wait_for_task(template.CreateSnapshot_Task(name="base", memory=False, quiesce=False))
    template.MarkAsTemplate()
    yield template
    destroy(template)


def test_template_replica_lifecycle(vsphere_plugin: Plugin, si: Any, gold: Any) -> None:
    host = _find(si, vim.HostSystem, CLUSTER_HOSTS[1])
    pool = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    replica = Lifecycle(vsphere_plugin.stub, REPLICA, f"copy-{CLUSTER_HOSTS[1]}")
    inputs = replica.checked(
        {
            "name": f"{gold.name}-{CLUSTER_HOSTS[1]}",
            "source_uuid": gold.config.uuid,
            "source_name": gold.name,
            "host_id": host._moId,
            "host_name": CLUSTER_HOSTS[1],
            "datastore_id": gold.datastore[0]._moId,
            "resource_pool_id": pool._moId,
            "linked": True,
            "snapshot_name": "base",
            "clone_timeout_minutes": 1,
        }
    )

    id_, outs, _ = replica.create(inputs)
    copy = si.RetrieveContent().searchIndex.FindByUuid(datacenter=None, uuid=id_, vmSearch=True, instanceUuid=False)
    try:
        assert copy is not None and copy.config.template is True and copy.runtime.host.name == CLUSTER_HOSTS[1]
        assert outs["uuid"] == id_ and outs["snapshot"] == "base" and outs["vm_name"] == copy.name
        read_id, read = replica.read(id_, outs)
        assert read_id == id_ and read["vm_name"] == copy.name
        assert no_change(replica.diff(id_, read, inputs))

        replica.delete(id_, outs)

        gone = si.RetrieveContent().searchIndex.FindByUuid(datacenter=None, uuid=id_, vmSearch=True, instanceUuid=False)
        assert gone is None
    finally:
        with contextlib.suppress(Exception):
            destroy(copy)


def test_without_credentials_check_works_and_vcenter_calls_name_the_missing_keys() -> None:
    """Preview on a machine without the vCenter settings: Check works, the first vCenter call says
    which keys are missing (components/vsphere/provider_base.py)."""
    with running_plugin(env={"VSPHERE_SERVER": "", "VSPHERE_USER": "", "VSPHERE_PASSWORD": ""}) as bare:
        configure(bare.stub, {"vsphereServer": None, "user": None, "password": None, "allowUnverifiedSsl": None})
        settings = Lifecycle(bare.stub, PVRDMA, "rdma-pvrdma-x")
        inputs = settings.checked({"host_name": "x", "vmknic_device": "vmk1", "allowed_network": RDMA_NET})
        with pytest.raises(grpc.RpcError) as refused:
            settings.read("pvrdma:x", inputs)
    assert "vsphere:vsphereServer" in refused.value.details()
    assert "vsphere:password" in refused.value.details()
