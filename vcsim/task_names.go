// Task descriptionIds as vCenter reports them: the vmodl name of the task's method, declaring type
// then method ("DistributedVirtualSwitch.reconfigure" for ReconfigureDvs_Task, "VirtualMachine.clone"
// for CloneVM_Task): pyVmomi's type info (VmomiSupport, each method's vmodl name beside its wsdl
// name) and the TaskManager's description list govmomi recorded from a vCenter
// (simulator/vpx/task_manager.go, keys "DistributedVirtualSwitch.reconfigure",
// "dvs.VmwareDistributedVirtualSwitch.reconfigure", "VirtualMachine.clone").
//
// govmomi 0.24's simulator names a task after its Go method instead (simulator/task.go,
// CreateTask: "<managed object type>.<method without _Task>", so
// "VmwareDistributedVirtualSwitch.reconfigureDvs", "VirtualMachine.cloneVm"), names vCenter never
// reports; code that matched them worked here only. The hook below renames every task whose Go
// name differs from vCenter's as the task is registered, before anyone can read it. The registry
// runs its handlers in no fixed order, so the harness's other hooks compare vcenterTaskID(...),
// which maps a vCenter name to itself. tests/components/vsphere/test_task_description_ids.py
// checks each name of vcenterTaskNames against pyVmomi's type info.
package main

import (
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// vcenterTaskNames maps the simulator's method part of a descriptionId to vCenter's descriptionId,
// for the tasks the harness and the code under test run whose names differ.
var vcenterTaskNames = map[string]string{
	"reconfigureDvs": "DistributedVirtualSwitch.reconfigure",
	"cloneVm":        "VirtualMachine.clone",
	"reconfigVm":     "VirtualMachine.reconfigure",
	"upgradeVm":      "VirtualMachine.upgradeVirtualHardware",
}

// vcenterTaskID is vCenter's descriptionId for a simulator's one; a vCenter name maps to itself.
func vcenterTaskID(id string) string {
	method := id[strings.LastIndex(id, ".")+1:]
	if name, ok := vcenterTaskNames[method]; ok {
		return name
	}
	return id
}

type taskNameHook struct{}

func (taskNameHook) Reference() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VcsimHarnessHook", Value: "task-names"}
}

func (taskNameHook) PutObject(obj mo.Reference) {
	if task, ok := obj.(*simulator.Task); ok {
		task.Info.DescriptionId = vcenterTaskID(task.Info.DescriptionId)
	}
}

func (taskNameHook) UpdateObject(mo.Reference, []types.PropertyChange) {}

func (taskNameHook) RemoveObject(types.ManagedObjectReference) {}

// registerTaskNameHook installs the hook; main calls it once the model exists.
func registerTaskNameHook() {
	simulator.Map.AddHandler(taskNameHook{})
}
