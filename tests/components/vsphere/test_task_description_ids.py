"""Issue 51 item 7: the task descriptionIds our code matches on are the ones vCenter reports.

vCenter names a task by its method's vmodl name, declaring type then method with a lower-case
first letter ("DistributedVirtualSwitch.reconfigure" for ReconfigureDvs_Task): pyVmomi's type info
holds each method's vmodl name beside its wsdl name (VmomiSupport, `_methodInfo`), and govmomi's
recording of vCenter's TaskManager descriptions (simulator/vpx/task_manager.go) lists the same
keys. govmomi's simulator reports its Go name instead ("VmwareDistributedVirtualSwitch.
reconfigureDvs", simulator/task.go `CreateTask`): code matching that never fired on a vCenter.
The harness renames its tasks to vCenter's names (vcsim/task_names.go); both are checked here.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pyVmomi import VmomiSupport, vim

from components.vcenter.tasks import wait_for_task
from components.vsphere import dvs_member_batch
from components.vsphere.template_copies import recovery
from tests.components.vsphere.conftest import ROOT

MATCHED = {
    "components/vsphere/dvs_member_batch.py": (dvs_member_batch._RECONFIGURE, "ReconfigureDvs_Task"),
    "components/vsphere/template_copies/recovery.py": (recovery._CLONE_TASK, "CloneVM_Task"),
}
"""Every descriptionId our code waits for (components/vcenter/tasks.py `active_tasks`), and the
method it stands for."""


def vmodl_task_method(description_id: str) -> str | None:
    """The wsdl name of the task method whose vmodl name `description_id` is, per pyVmomi; None
    when pyVmomi knows no such type or method (a name vCenter does not report)."""
    type_name, _, method = description_id.rpartition(".")
    if not type_name or not method or not method[0].islower():
        return None
    try:
        managed = VmomiSupport.GetVmodlType(f"vim.{type_name}")
    except (AttributeError, KeyError):
        return None
    for klass in getattr(managed, "__mro__", ()):
        info = getattr(klass, "_methodInfo", {}).get(method[0].upper() + method[1:])
        if info is not None and info.wsdlName.endswith("_Task"):
            return str(info.wsdlName)
    return None


def govmomi_task_id(wsdl_name: str) -> str:
    """The method part of govmomi's simulator descriptionId for a task method (simulator/task.go:
    `NewTask` turns the runner's "VM" into "Vm", `CreateTask` drops "_Task"; the lower-case first
    letter is the Go method's receiver convention the simulator's tasks follow)."""
    name = wsdl_name.removesuffix("_Task").replace("VM", "Vm", 1)
    return name[0].lower() + name[1:]


@pytest.mark.parametrize("where", sorted(MATCHED))
def test_every_description_id_our_code_matches_is_vcenters(where: str) -> None:
    description_id, method = MATCHED[where]
    assert vmodl_task_method(description_id) == method, (
        f"{where} matches {description_id!r}, which is not the vmodl name of {method} (vCenter reports "
        "'<declaring type>.<vmodl method>', e.g. 'DistributedVirtualSwitch.reconfigure')"
    )


def test_the_simulators_go_names_are_not_vmodl_names() -> None:
    """The check above can fail: the names govmomi's simulator makes up are refused."""
    for go_name in ("VmwareDistributedVirtualSwitch.reconfigureDvs", "VirtualMachine.cloneVm", "reconfigureDvs"):
        assert vmodl_task_method(go_name) is None, go_name
    assert vmodl_task_method("dvs.VmwareDistributedVirtualSwitch.reconfigure") == "ReconfigureDvs_Task"


def test_the_harness_renames_its_tasks_to_vcenters_names() -> None:
    source = (ROOT / "vcsim" / "task_names.go").read_text()
    table = dict(re.findall(r'^\s*"(\w+)":\s*"([\w.]+)",', source.split("var vcenterTaskNames")[1], re.MULTILINE))
    assert {"reconfigureDvs", "cloneVm"} <= set(table)
    for go_id, vcenter_name in table.items():
        method = vmodl_task_method(vcenter_name)
        assert method is not None, f"vcsim/task_names.go: {vcenter_name!r} is not a vmodl task name"
        assert govmomi_task_id(method) == go_id, (
            f"vcsim/task_names.go: {go_id!r} is not the simulator's name of {method}"
        )


@pytest.mark.vcsim
def test_the_harness_reports_vcenters_description_id_for_a_switch_reconfigure(extended: Any, si: Any) -> None:
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.DistributedVirtualSwitch], True)
    dvs = view.view[0]
    view.Destroy()
    spec = vim.DVSConfigSpec(configVersion=dvs.config.configVersion, description="issue 51")
    task = dvs.ReconfigureDvs_Task(spec)
    wait_for_task(task, object_name=dvs.name)

    assert task.info.descriptionId == dvs_member_batch._RECONFIGURE
