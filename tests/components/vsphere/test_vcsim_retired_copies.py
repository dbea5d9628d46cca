"""`python -m stacks retired-copies` against the vCenter simulator: a retired copy nothing hangs
off any more is listed, and deleted with --delete; one that linked clones still hang off, and a VM
that merely carries the suffix without the copy's mark, are left alone."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVmomi import vim, vmodl

from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy
from components.vsphere.template_copies.replica import TemplateReplicaProvider
from stacks.tools.retired_copies.command import run
from tests.components.vsphere.conftest import CLUSTER_HOSTS, TEMPLATE_VM, _find
from tests.components.vsphere.replica_helpers import copy_props, disk_file, hang_off, vm_by_uuid
from tests.components.vsphere.vm_helpers import clone, destroy, unique

pytestmark = pytest.mark.vcsim


@pytest.fixture
def source(si: Any) -> Iterator[Any]:
    template = clone(_find(si, vim.VirtualMachine, TEMPLATE_VM), unique("gold"))
    wait_for_task(template.CreateSnapshot_Task(name="base", memory=False, quiesce=False))
    template.MarkAsTemplate()
    yield template
    destroy(template)


def _worker_of(si: Any, source: Any, copy: Any) -> Any:
    """A worker's linked clone of the copy, with the chains vCenter gives them (`hang_off`)."""
    pool = _find(si, vim.ClusterComputeResource, "DC0_C0").resourcePool
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(diskMoveType="createNewChildDiskBacking", pool=pool),
                            powerOn=False, snapshot=copy.snapshot.currentSnapshot)  # fmt: skip
    worker = wait_for_task(copy.CloneVM_Task(folder=copy.parent, name=unique("worker"), spec=spec))
    hang_off(si, copy, disk_file(source))
    hang_off(si, worker, disk_file(copy))
    return worker


def test_retired_copies_nothing_hangs_off_are_deleted_the_others_kept(
    si: Any, source: Any, configured: Callable[..., Any], vcsim: Any
) -> None:
    provider = configured(TemplateReplicaProvider(clone_timeout_minutes=1, retry=RetryPolicy(attempts=2)))
    done = provider.create(copy_props(si, source, CLUSTER_HOSTS[1]))
    busy = provider.create(copy_props(si, source, CLUSTER_HOSTS[2]))
    finished, still = _worker_of(si, source, vm_by_uuid(si, done.id)), _worker_of(si, source, vm_by_uuid(si, busy.id))
    # Not a copy: the suffix alone never makes a VM one (no gpucluster.templateReplica mark).
    stranger = clone(_find(si, vim.VirtualMachine, TEMPLATE_VM), f"{source.name}-other-retired")
    wait_for_task(stranger.CreateSnapshot_Task(name="base", memory=False, quiesce=False))
    stranger.MarkAsTemplate()
    try:
        for made in (done, busy):
            provider.delete(made.id, made.outs)  # workers hang off both: retired, not destroyed
        destroy(finished)  # the rollout moved that worker on
        retired_name = vm_by_uuid(si, done.id).name
        kept_name = vm_by_uuid(si, busy.id).name

        listed = io.StringIO()
        assert run(vcsim.config(), template=source.name, datacenter="DC0", delete=False, out=listed) == 0
        assert f"unused   {retired_name}: no VM hangs off it" in listed.getvalue()
        assert f"kept     {kept_name}: 1 VM(s) hang off it ({still.name})" in listed.getvalue()
        assert vm_by_uuid(si, done.id) is not None  # listing deletes nothing

        deleted = io.StringIO()
        assert run(vcsim.config(), template=source.name, datacenter="DC0", delete=True, out=deleted) == 0
        assert f"deleted  {retired_name}" in deleted.getvalue()
        assert vm_by_uuid(si, done.id) is None
        assert vm_by_uuid(si, busy.id) is not None and vm_by_uuid(si, busy.id).name == kept_name
        assert stranger.name not in deleted.getvalue() and stranger.config is not None
        assert deleted.getvalue().splitlines()[-1] == f"retired copies of {source.name!r}: 2, 1 deleted"
    finally:
        for vm in (still, finished):
            with contextlib.suppress(vmodl.fault.ManagedObjectNotFound):  # destroyed by the test
                destroy(vm)
        for made in (done, busy):
            leftover = vm_by_uuid(si, made.id)
            if leftover is not None:
                wait_for_task(leftover.Destroy_Task())
        wait_for_task(stranger.Destroy_Task())
