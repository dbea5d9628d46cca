"""A switch edit refused for a stale configVersion, or because another reconfigure of the switch
was running, is retried, not failed (the classification alone, with the refusal played by a task
object; test_vcsim_dvs_host_member.py has the harness refuse them for real)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vsphere.dvs_host_member import reconfigure_member


def _switch(fault: Any) -> Any:
    info = SimpleNamespace(state=vim.TaskInfo.State.error, error=fault, descriptionId="reconfigureDvs", entityName="sw")
    task = SimpleNamespace(info=info, _moId="task-1")
    return SimpleNamespace(name="sw", config=SimpleNamespace(configVersion="7"), ReconfigureDvs_Task=lambda spec: task)


@pytest.mark.parametrize(
    ("fault", "transient"),
    [
        (vim.fault.ConcurrentAccess(), True),
        (vim.fault.DvsOperationBulkFault(), True),
        (vim.fault.ResourceInUse(), False),
    ],
    ids=["stale-config-version", "switch-busy", "resource-in-use"],
)
def test_only_a_concurrent_edit_is_transient(fault: Any, transient: bool) -> None:
    host = vim.HostSystem("host-1")
    with pytest.raises(VsphereError) as info:
        reconfigure_member(_switch(fault), host, "remove", [], host_name="esx-1")
    assert info.value.transient is transient
    assert info.value.fault is fault


def _refusing_switch(fault: Any) -> Any:
    """A switch whose `ReconfigureDvs_Task` call itself raises the fault, as pyVmomi raises a SOAP
    fault vCenter answers the call with (no task made): the method's declared faults include
    ConcurrentAccess and DvsFault whether the task or the call reports them."""

    def refuse(spec: Any) -> Any:
        raise fault

    return SimpleNamespace(name="sw", config=SimpleNamespace(configVersion="7"), ReconfigureDvs_Task=refuse)


@pytest.mark.parametrize(
    ("fault", "transient"),
    [
        (vim.fault.ConcurrentAccess(), True),
        (vim.fault.DvsOperationBulkFault(), True),
        (vim.fault.ResourceInUse(), False),
    ],
    ids=["stale-config-version", "switch-busy", "resource-in-use"],
)
def test_a_conflict_raised_by_the_call_itself_is_transient_too(fault: Any, transient: bool) -> None:
    host = vim.HostSystem("host-1")
    with pytest.raises(VsphereError) as info:
        reconfigure_member(_refusing_switch(fault), host, "add", ["vmnic4"], host_name="esx-1")
    assert info.value.transient is transient
    assert info.value.fault is fault
    assert "esx-1" in str(info.value) and "sw" in str(info.value)
