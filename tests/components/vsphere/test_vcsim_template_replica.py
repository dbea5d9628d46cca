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
from tests.components.vsphere.conftest import CLUSTER_HOSTS, TEMPLATE_VM, _find
from tests.components.vsphere.replica_helpers import copy_props, disk_file, hang_off, vm_by_uuid
from tests.components.vsphere.vm_helpers import clone, destroy, power_on, unique

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


@pytest.mark.parametrize("linked", [True, False])
def test_the_copy_is_a_template_on_its_host_with_one_snapshot(
    si: Any, source: Any, provider: TemplateReplicaProvider, linked: bool
) -> None:
    props = copy_props(si, source, CLUSTER_HOSTS[2], linked=linked)
    created = provider.create(props)
    try:
        copy = vm_by_uuid(si, created.id)
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
    assert vm_by_uuid(si, created.id) is None
    assert provider.read(created.id, props).id == ""  # gone: refresh drops it from state


def test_an_interrupted_create_is_finished_not_cloned_again(
    si: Any, source: Any, provider: TemplateReplicaProvider
) -> None:
    props = copy_props(si, source, CLUSTER_HOSTS[1])
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
    props = copy_props(si, source, CLUSTER_HOSTS[1])
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
            provider.create(copy_props(si, bare, CLUSTER_HOSTS[0]))
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
    props = copy_props(si, source, CLUSTER_HOSTS[3])
    pool = _other_pool(si)
    moved = {**props, "resource_pool_id": pool._moId, "snapshot_name": "base2"}
    old = provider.create(props)
    new = None
    try:
        new = provider.create(moved)
        assert new.id != old.id
        provider.delete(old.id, old.outs)
        assert vm_by_uuid(si, old.id) is None and vm_by_uuid(si, new.id) is not None
    finally:
        for made in (old, new):
            if made is not None:
                provider.delete(made.id, made.outs)
        # The pool stays: govmomi's simulator drops the connection on ResourcePool.Destroy_Task.
    # Inputs alone (no credentials: no drift read, as in an offline preview).
    assert not TemplateReplicaProvider().diff("id", props, moved).replaces


def test_a_finished_copy_whose_answer_was_lost_is_adopted_and_the_replaced_halfs_delete_keeps_it(
    si: Any, source: Any, provider: TemplateReplicaProvider
) -> None:
    """Issue 43 item 3: the plugin killed after the copy became a template, then the same create
    again (a re-run). The copy carries this resource's marks and nothing hangs off it: it is
    adopted. The same happens in a forced `pulumi up --replace` of a copy without workers (same
    inputs, same name), and Pulumi's delete of "the old" resource then must not destroy it."""
    props = copy_props(si, source, CLUSTER_HOSTS[3])
    old = provider.create(props)
    try:
        again = provider.create(props)
        assert again.id == old.id and again.outs == old.outs
        provider.delete(old.id, old.outs)  # the replaced half: the same VM, now the new resource's
        assert vm_by_uuid(si, old.id) is not None
    finally:
        TemplateReplicaProvider.delete(_fresh(provider), old.id, old.outs)
    assert vm_by_uuid(si, old.id) is None


def _fresh(provider: TemplateReplicaProvider) -> TemplateReplicaProvider:
    """Another plugin process: it adopted nothing."""
    other = TemplateReplicaProvider(retry=provider.retry)
    other.use_connection(provider.connection)
    return other


def test_create_refuses_a_finished_copy_that_vms_are_cloned_from(
    si: Any, source: Any, provider: TemplateReplicaProvider
) -> None:
    """`pulumi up --replace` of a live copy: same inputs, same name, and workers hang off it. A
    create that never answered cannot have workers, so this is another resource's copy: refused."""
    props = copy_props(si, source, CLUSTER_HOSTS[3])
    old = provider.create(props)
    copy = vm_by_uuid(si, old.id)
    pool = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(diskMoveType="createNewChildDiskBacking", pool=pool),
                            powerOn=False, snapshot=copy.snapshot.currentSnapshot)  # fmt: skip
    worker = wait_for_task(copy.CloneVM_Task(folder=copy.parent, name=unique("worker"), spec=spec))
    try:
        hang_off(si, copy, disk_file(source))
        hang_off(si, worker, disk_file(copy))
        with pytest.raises(VsphereError, match="already exists") as refused:
            _fresh(provider).create(props)
        assert vm_by_uuid(si, old.id) is not None
        assert worker.name in str(refused.value)
        # Importing it would give one VM two owners: whichever replaces it first deletes the other's source.
        assert "or `pulumi import` it" not in str(refused.value)
        assert "Never `pulumi import` it" in str(refused.value)
    finally:
        destroy(worker)
        provider.delete(old.id, old.outs)


def test_a_copy_a_linked_clone_still_hangs_off_is_retired_not_destroyed(
    si: Any, source: Any, provider: TemplateReplicaProvider, capsys: Any
) -> None:
    """A pending delete Pulumi retires at the start of the next update, while a worker not rolled yet
    is still a linked clone of the copy. govmomi's simulator drops a clone's disk parent
    (CloneVMTask sets Backing.Parent = nil), so the disks are given the chain a linked clone has on
    vCenter (`hang_off`): the worker's parent is the copy's disk, the copy's the template's."""
    props = copy_props(si, source, CLUSTER_HOSTS[0])
    created = provider.create(props)
    copy = vm_by_uuid(si, created.id)
    pool = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(diskMoveType="createNewChildDiskBacking", pool=pool),
                            powerOn=False, snapshot=copy.snapshot.currentSnapshot)  # fmt: skip
    worker = wait_for_task(copy.CloneVM_Task(folder=copy.parent, name=unique("worker"), spec=spec))
    try:
        hang_off(si, copy, disk_file(source))
        hang_off(si, worker, disk_file(copy))
        provider.delete(created.id, created.outs)
        kept = vm_by_uuid(si, created.id)
        assert kept is not None and kept.name.endswith("-retired") and kept.config.template
        assert kept.name in capsys.readouterr().err
        power_on(worker)
    finally:
        destroy(worker)
        leftover = vm_by_uuid(si, created.id)
        if leftover is not None:
            wait_for_task(leftover.Destroy_Task())


def test_a_sibling_copy_of_the_same_template_is_no_linked_clone_of_it(
    si: Any, source: Any, provider: TemplateReplicaProvider
) -> None:
    """Two linked copies of one template: each one's disk chain goes on into the template's disk.
    Deleting one must not count the other as hanging off it (issue 32 item 5: with two or more
    copies nothing was ever deleted and `-retired` copies piled up)."""
    first = provider.create(copy_props(si, source, CLUSTER_HOSTS[1]))
    second = provider.create(copy_props(si, source, CLUSTER_HOSTS[2]))
    try:
        for made in (first, second):
            hang_off(si, vm_by_uuid(si, made.id), disk_file(source))
        provider.delete(second.id, second.outs)
        assert vm_by_uuid(si, second.id) is None, "the second copy was retired, not destroyed"
    finally:
        for made in (first, second):
            leftover = vm_by_uuid(si, made.id)
            if leftover is not None:
                wait_for_task(leftover.Destroy_Task())


def test_two_stacks_with_the_same_template_and_host_get_copies_of_their_own(
    si: Any, source: Any, provider: TemplateReplicaProvider
) -> None:
    """Issue 32 item 1: the copy's name had no stack in it, so a second stack with the same
    template and host (a host can carry a second RDMA NIC) was refused at create."""
    dev = {**copy_props(si, source, CLUSTER_HOSTS[2]), "stack": "dev"}
    staging = {**dev, "stack": "staging"}
    first = provider.create(dev)
    second = None
    try:
        second = provider.create(staging)
        assert second.id != first.id
        assert first.outs["vm_name"].startswith(f"{dev['name']}-dev-")
        assert second.outs["vm_name"].startswith(f"{dev['name']}-staging-")
    finally:
        for made in (first, second):
            if made is not None:
                provider.delete(made.id, made.outs)


def test_a_copy_made_before_copies_carried_the_stack_keeps_its_name(
    si: Any, source: Any, provider: TemplateReplicaProvider
) -> None:
    """A stack that upgrades: its copies have no `stack` input yet. A rename would replace every
    copy (and roll every worker cloned from one); the stack is recorded in place instead, and the
    live copy keeps its name (a physical name takes no alias)."""
    legacy = copy_props(si, source, CLUSTER_HOSTS[0])  # no "stack": made by the program before
    created = provider.create(legacy)
    try:
        news = {**legacy, "stack": "dev"}
        diff = provider.diff(created.id, created.outs, news)
        assert diff.changes and not diff.replaces
        updated = provider.update(created.id, created.outs, news)
        assert updated.outs["vm_name"] == created.outs["vm_name"] == vm_by_uuid(si, created.id).name
        assert "-dev-" not in updated.outs["vm_name"] and updated.outs["stack"] == "dev"
    finally:
        provider.delete(created.id, created.outs)


def test_a_copy_deleted_by_hand_is_seen_by_the_next_diff_and_made_again(
    si: Any, source: Any, provider: TemplateReplicaProvider
) -> None:
    """Issue 32 item 8: without `pulumi refresh` the state kept the dead uuid and the rollout
    cloned it. The diff reads the copy: gone, it is replaced."""
    props = {**copy_props(si, source, CLUSTER_HOSTS[1]), "stack": "dev"}
    created = provider.create(props)
    wait_for_task(vm_by_uuid(si, created.id).Destroy_Task())

    diff = provider.diff(created.id, created.outs, props)

    assert diff.changes and diff.replaces == ["uuid"]
    again = provider.create(props)  # what the replacement runs: the name is free again
    try:
        copy = vm_by_uuid(si, again.id)
        assert copy is not None and copy.config.template and copy.snapshot is not None
        # (The old resource's delete then finds nothing on vCenter, where a clone gets a new BIOS
        # UUID; govmomi's simulator derives it from the .vmx path (simulator/virtual_machine.go,
        # sha1UUID(VmPathName)), so here the new copy has the old uuid.)
    finally:
        provider.delete(again.id, again.outs)


def test_a_copy_whose_snapshot_was_removed_is_seen_and_repaired_in_place(
    si: Any, source: Any, provider: TemplateReplicaProvider
) -> None:
    """The snapshot removed by hand (a template takes no snapshot change: made a VM, the snapshot
    removed, made a template again): linked clones of it fail. The diff says so and the update
    takes the snapshot again, keeping the copy's uuid (no worker rolls)."""
    props = {**copy_props(si, source, CLUSTER_HOSTS[1]), "stack": "dev"}
    created = provider.create(props)
    copy = vm_by_uuid(si, created.id)
    try:
        copy.MarkAsVirtualMachine(pool=_find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool)
        wait_for_task(copy.RemoveAllSnapshots_Task())
        copy.MarkAsTemplate()

        diff = provider.diff(created.id, created.outs, props)
        assert diff.changes and not diff.replaces
        updated = provider.update(created.id, created.outs, props)

        assert copy.config.template is True and copy.snapshot is not None
        assert [tree.name for tree in copy.snapshot.rootSnapshotList] == ["base"]
        assert updated.outs["uuid"] == created.id and updated.outs["snapshot"] == "base"
        assert not provider.diff(created.id, updated.outs, props).changes
    finally:
        provider.delete(created.id, created.outs)


def test_a_copy_of_a_copy_clones_its_snapshot_and_keeps_it_while_it_hangs_off(
    si: Any, source: Any, provider: TemplateReplicaProvider, capsys: Any
) -> None:
    """Past seven copies a copy clones an earlier copy (`plan.copy_sources`): the provider clones a
    copy's snapshot as it does the template's, and deleting the first copy while the second still
    hangs off it retires it (a destroy deletes the second first: it depends on the first's uuid).
    The disks get the chains they have on vCenter (`hang_off`: the simulator drops a clone's parent)."""
    first = provider.create(copy_props(si, source, CLUSTER_HOSTS[0]))
    parent = vm_by_uuid(si, first.id)
    second = provider.create(copy_props(si, parent, CLUSTER_HOSTS[1]))
    try:
        child = vm_by_uuid(si, second.id)
        assert child is not None and child.config.template and child.runtime.host.name == CLUSTER_HOSTS[1]
        assert [tree.name for tree in child.snapshot.rootSnapshotList] == ["base"]
        hang_off(si, parent, disk_file(source))
        hang_off(si, child, disk_file(parent))
        provider.delete(first.id, first.outs)
        kept = vm_by_uuid(si, first.id)
        assert kept is not None and kept.name.endswith("-retired")
        assert kept.name in capsys.readouterr().err
        provider.delete(second.id, second.outs)
        assert vm_by_uuid(si, second.id) is None
    finally:
        for made in (second, first):
            leftover = vm_by_uuid(si, made.id)
            if leftover is not None:
                wait_for_task(leftover.Destroy_Task())
