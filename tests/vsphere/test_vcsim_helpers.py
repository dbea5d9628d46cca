"""The shared pyvmomi helpers (_vsphere) against the vCenter simulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyVmomi import vim

from components.vsphere import _vsphere
from components.vsphere._vsphere import VcenterConnection, VsphereError
from components.vsphere.pvrdma_host import PvrdmaHostSettingsProvider

pytestmark = pytest.mark.vcsim


def test_find_helpers(vcsim: Any, si: Any, find: Callable[[Any, str], Any]) -> None:
    assert _vsphere.find_host(si, "DC0_C0_H1")._moId == find(vim.HostSystem, "DC0_C0_H1")._moId
    assert _vsphere.find_host_or_none(si, "nope") is None
    vm = find(vim.VirtualMachine, "DC0_H0_VM0")
    assert _vsphere.find_vm(si, "DC0_H0_VM0")._moId == vm._moId
    assert _vsphere.find_vm_by_uuid(si, vm.config.uuid)._moId == vm._moId
    assert _vsphere.find_vm_by_uuid(si, "00000000-0000-0000-0000-000000000000") is None


def test_wait_for_task_reraises_the_fault_text_and_object(fresh_vm: Any) -> None:
    _vsphere.wait_for_task(fresh_vm.PowerOffVM_Task())
    task = fresh_vm.PowerOffVM_Task()  # already off: the task fails

    with pytest.raises(VsphereError) as info:
        _vsphere.wait_for_task(task, object_name="worker-1", what="power off")

    assert str(info.value).startswith("power off on worker-1 failed: InvalidPowerState")
    assert info.value.object_name == "worker-1"
    assert isinstance(info.value.fault, vim.fault.InvalidPowerState)
    assert not info.value.transient


def test_connection_is_cached_and_an_expired_session_is_renewed(
    vcsim: Any, configured: Callable[..., Any], host_name: str
) -> None:
    provider = configured(PvrdmaHostSettingsProvider())
    conn = provider.connection
    first = _vsphere.connect(conn)
    assert _vsphere.connect(conn) is first

    first.content.sessionManager.Logout()  # session gone (vCenter restart, idle timeout)

    result = provider.read(f"pvrdma:{host_name}", {"host_name": host_name, "vmknic_device": "vmk1"})
    assert result.id == f"pvrdma:{host_name}"
    assert _vsphere.connect(conn) is not first


def test_wrong_password_fails_at_once_with_the_user(vcsim: Any) -> None:
    good = VcenterConnection.from_url(vcsim.url)
    bad = VcenterConnection(server=good.server, user="nobody", password="wrong", port=good.port, protocol="http")
    provider = PvrdmaHostSettingsProvider()
    provider.use_connection(bad)
    with pytest.raises(VsphereError, match=r"refused the login of user 'nobody'"):
        provider.read("pvrdma:x", {"host_name": "x", "vmknic_device": "vmk1"})
