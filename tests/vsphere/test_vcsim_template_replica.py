"""TemplateReplica against the vCenter simulator: the copy exists on its host, is a template with one
snapshot, serves a linked clone, is finished (not cloned twice) after an interrupted create, and goes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy
from components.vsphere.template_copies.replica import MARK, TemplateReplicaProvider, copy_name
from tests.vsphere.conftest import CLUSTER_HOSTS, TEMPLATE_VM, _find
from tests.vsphere.vm_helpers import clone, destroy, power_on, unique

pytestmark = pytest.mark.vcsim

FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.1, max_delay=0.5, max_total=10)


@pytest.fixture
def source(si: Any) -> Iterator[Any]:
    """A template with one snapshot `base`, what vcenter.gpuTemplate names with linked clones."""
    template = clone(_find(si, vim.VirtualMachine, TEMPLATE_VM), unique("gold"))
    wait_for_task(template.CreateSnapshot_Task(name="base", memory=False, quiesce=False))
    template.MarkAsTemplate()
    yield template
    destroy(template)


@pytest.fixture
def provider(configured: Callable[..., Any], vcsim: Any) -> TemplateReplicaProvider:
    return configured(TemplateReplicaProvider(clone_timeout_minutes=1, retry=FAST_RETRY))


def _props(si: Any, source: Any, host_name: str, *, linked: bool = True) -> dict[str, Any]:
    host = _find(si, vim.HostSystem, host_name)
    pool = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    return {
        "name": f"{source.name}-{host_name}",
        "source_uuid": source.config.uuid,
        "source_name": source.name,
        "host_id": host._moId,
        "host_name": host_name,
        "datastore_id": source.datastore[0]._moId,
        "resource_pool_id": pool._moId,
        "linked": linked,
        "snapshot_name": "base",
    }


def _vm(si: Any, uuid: str) -> Any:
    return si.RetrieveContent().searchIndex.FindByUuid(datacenter=None, uuid=uuid, vmSearch=True, instanceUuid=False)


@pytest.mark.parametrize("linked", [True, False])
def test_the_copy_is_a_template_on_its_host_with_one_snapshot(
    si: Any, source: Any, provider: TemplateReplicaProvider, linked: bool
) -> None:
    props = _props(si, source, CLUSTER_HOSTS[2], linked=linked)
    created = provider.create(props)
    try:
        copy = _vm(si, created.id)
        assert copy is not None and copy.config.uuid != source.config.uuid
        assert copy.config.template is True
        assert copy.runtime.host.name == CLUSTER_HOSTS[2]
        assert copy.name == copy_name(props["name"], props) == created.outs["vm_name"]
        assert [tree.name for tree in copy.snapshot.rootSnapshotList] == ["base"]
        assert created.outs["uuid"] == created.id and created.outs["snapshot"] == "base"
        # A worker's linked clone from the copy, as pulumi-vsphere makes it (clone.linked_clone).
        spec = vim.vm.CloneSpec(
            location=vim.vm.RelocateSpec(
                diskMoveType="createNewChildDiskBacking",
                pool=_find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool,
            ),
            powerOn=False,
            snapshot=copy.snapshot.currentSnapshot,
        )
        worker = wait_for_task(copy.CloneVM_Task(folder=copy.parent, name=unique("worker"), spec=spec))
        destroy(worker)
        assert provider.read(created.id, props).id == created.id
    finally:
        provider.delete(created.id, created.outs)
    assert _vm(si, created.id) is None
    assert provider.read(created.id, props).id == ""  # gone: refresh drops it from state


def test_an_interrupted_create_is_finished_not_cloned_again(
    si: Any, source: Any, provider: TemplateReplicaProvider
) -> None:
    props = _props(si, source, CLUSTER_HOSTS[1])
    name = copy_name(props["name"], props)
    # What a create that lost vCenter after its clone leaves: a plain VM of the copy's name.
    half = wait_for_task(
        source.CloneVM_Task(
            folder=source.parent,
            name=name,
            spec=vim.vm.CloneSpec(
                location=vim.vm.RelocateSpec(pool=_find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool),
                powerOn=False,
                config=vim.vm.ConfigSpec(extraConfig=[vim.option.OptionValue(key=MARK, value=name)]),
            ),
        )
    )
    created = provider.create(props)
    try:
        assert created.id == half.config.uuid
        assert half.config.template is True and half.snapshot is not None
    finally:
        provider.delete(created.id, created.outs)


def test_an_unmarked_vm_of_the_copy_name_is_not_taken(si: Any, source: Any, provider: TemplateReplicaProvider) -> None:
    props = _props(si, source, CLUSTER_HOSTS[1])
    stranger = clone(_find(si, vim.VirtualMachine, TEMPLATE_VM), copy_name(props["name"], props))
    try:
        with pytest.raises(VsphereError, match="not marked"):
            provider.create(props)
        assert stranger.config.template is False
    finally:
        destroy(stranger)


def test_a_linked_copy_of_a_template_without_snapshot_names_the_setting(
    si: Any, provider: TemplateReplicaProvider
) -> None:
    bare = clone(_find(si, vim.VirtualMachine, TEMPLATE_VM), unique("bare"))
    try:
        with pytest.raises(VsphereError, match=r"vcenter\.templateSnapshot"):
            provider.create(_props(si, bare, CLUSTER_HOSTS[0]))
    finally:
        destroy(bare)


def test_what_shapes_the_copy_replaces_it_first_and_messages_do_not() -> None:
    provider = TemplateReplicaProvider()
    olds = {"name": "t-h1", "source_uuid": "u1", "host_id": "host-1", "datastore_id": "ds-1",
            "resource_pool_id": "rp", "linked": True, "snapshot_name": "base", "source_name": "t", "host_name": "h1"}  # fmt: skip
    for key, value in (("source_uuid", "u2"), ("host_id", "host-2"), ("linked", False)):
        result = provider.diff("id", olds, {**olds, key: value})
        assert result.replaces == [key] and result.delete_before_replace is False
        assert copy_name("t-h1", olds) != copy_name("t-h1", {**olds, key: value})
    for key, value in (("resource_pool_id", "rp2"), ("snapshot_name", "base2"), ("name", "t2-h1")):
        assert copy_name("t-h1", olds) != copy_name("t-h1", {**olds, key: value})
    for key, value in (("resource_pool_id", "rp2"), ("snapshot_name", "base2")):
        moved = provider.diff("id", olds, {**olds, key: value})
        assert moved.changes and not moved.replaces  # nothing to do on a template: in place
    renamed = provider.diff("id", olds, {**olds, "host_name": "h1.example"})
    assert renamed.changes and not renamed.replaces
    assert not provider.diff("id", olds, dict(olds)).changes


def _other_pool(si: Any) -> Any:
    parent = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    alloc = vim.ResourceAllocationInfo(limit=-1, reservation=0, expandableReservation=True,
                                       shares=vim.SharesInfo(level="normal", shares=0))  # fmt: skip
    return parent.CreateResourcePool(
        name=unique("rp"), spec=vim.ResourceConfigSpec(cpuAllocation=alloc, memoryAllocation=alloc)
    )


def test_a_new_pool_or_snapshot_name_never_takes_the_live_copy(
    si: Any, source: Any, provider: TemplateReplicaProvider
) -> None:
    """Pool and snapshot name are applied in place (nothing to do on a template); were the copy
    replaced anyway (`pulumi up --replace`, or with a host change), the new copy is another VM and
    deleting the old resource leaves it: create never adopts the live copy of other inputs."""
    props = _props(si, source, CLUSTER_HOSTS[3])
    pool = _other_pool(si)
    moved = {**props, "resource_pool_id": pool._moId, "snapshot_name": "base2"}
    old = provider.create(props)
    new = None
    try:
        new = provider.create(moved)
        assert new.id != old.id
        provider.delete(old.id, old.outs)
        assert _vm(si, old.id) is None and _vm(si, new.id) is not None
    finally:
        for made in (old, new):
            if made is not None:
                provider.delete(made.id, made.outs)
        # The pool stays: govmomi's simulator drops the connection on ResourcePool.Destroy_Task.
    assert not provider.diff("id", props, moved).replaces


def test_create_refuses_a_finished_copy_it_did_not_make(
    si: Any, source: Any, provider: TemplateReplicaProvider
) -> None:
    """`pulumi up --replace` of a copy: same inputs, same name. Adopting the live copy would have
    Pulumi delete it right after (the old resource's id is the same VM)."""
    props = _props(si, source, CLUSTER_HOSTS[3])
    old = provider.create(props)
    try:
        with pytest.raises(VsphereError, match="already exists"):
            provider.create(props)
        assert _vm(si, old.id) is not None
    finally:
        provider.delete(old.id, old.outs)


def test_a_copy_a_linked_clone_still_hangs_off_is_retired_not_destroyed(
    si: Any, source: Any, provider: TemplateReplicaProvider, capsys: Any
) -> None:
    """A pending delete Pulumi retires at the start of the next update, while a worker not rolled yet
    is still a linked clone of the copy. govmomi's simulator drops a clone's disk parent
    (CloneVMTask sets Backing.Parent = nil), so the worker's disk is given the parent a linked clone
    has on vCenter: the copy's disk (`VirtualDisk.backing.parent.fileName`)."""
    props = _props(si, source, CLUSTER_HOSTS[0])
    created = provider.create(props)
    copy = _vm(si, created.id)
    pool = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(diskMoveType="createNewChildDiskBacking", pool=pool),
                            powerOn=False, snapshot=copy.snapshot.currentSnapshot)  # fmt: skip
    worker = wait_for_task(copy.CloneVM_Task(folder=copy.parent, name=unique("worker"), spec=spec))
    try:
        disk = next(d for d in worker.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk))
        copy_disk = next(d for d in copy.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk))
        disk.backing.parent = vim.vm.device.VirtualDisk.FlatVer2BackingInfo(
            fileName=copy_disk.backing.fileName, diskMode="persistent"
        )
        change = vim.vm.device.VirtualDeviceSpec(operation="edit", device=disk)
        wait_for_task(worker.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[change])))
        provider.delete(created.id, created.outs)
        kept = _vm(si, created.id)
        assert kept is not None and kept.name.endswith("-retired") and kept.config.template
        assert kept.name in capsys.readouterr().err
        power_on(worker)
    finally:
        destroy(worker)
        leftover = _vm(si, created.id)
        if leftover is not None:
            wait_for_task(leftover.Destroy_Task())
