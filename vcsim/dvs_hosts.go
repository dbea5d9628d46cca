// Hosts on a distributed switch: VMkernel adapters on switch ports, and the refusal to take a
// host off a switch while something on that host still uses it.
//
// vCenter refuses ReconfigureDvs_Task removing a host member while the host's VMkernel adapters
// or VM network adapters are connected to the switch: the task fails with vim.fault.ResourceInUse
// (vSphere Web Services API, fault ResourceInUse, "thrown by ... ReconfigureDvs_Task"; vSphere
// Networking, "Remove Hosts from a vSphere Distributed Switch": migrate the host's VMkernel and VM
// network adapters off the switch first). govmomi 0.24's simulator checks VM ports only (a VM on
// the host whose network is one of the switch's port groups) and has no VMkernel adapters at all
// (HostNetworkSystem.AddVirtualNic is missing), so this adds both.
package main

import (
	"fmt"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// hostNetworkSystem adds VMkernel adapters to the simulator's HostNetworkSystem. Nothing in the
// simulator type-asserts *HostNetworkSystem, so the registry can hold this wrapper instead.
//
// The simulator's object is embedded by value: the property collector finds the mo type by
// walking first fields of structs, which a pointer would stop.
type hostNetworkSystem struct {
	simulator.HostNetworkSystem

	host *simulator.HostSystem
}

// hostNetworks: the wrapped network system of each host, by the host's moref value.
var hostNetworks = map[string]*hostNetworkSystem{}

// AddVirtualNic adds a VMkernel adapter, on a standard port group or a distributed switch port.
func (s *hostNetworkSystem) AddVirtualNic(req *types.AddVirtualNic) soap.HasFault {
	body := &methods.AddVirtualNicBody{}
	device := fmt.Sprintf("vmk%d", len(s.NetworkInfo.Vnic)+1) // vmk0 is the management adapter
	s.NetworkInfo.Vnic = append(s.NetworkInfo.Vnic, types.HostVirtualNic{
		Device:    device,
		Key:       "key-vim.host.VirtualNic-" + device,
		Portgroup: req.Portgroup,
		Spec:      req.Nic,
	})
	body.Res = &types.AddVirtualNicResponse{Returnval: device}
	return body
}

// RemoveVirtualNic removes a VMkernel adapter.
func (s *hostNetworkSystem) RemoveVirtualNic(req *types.RemoveVirtualNic) soap.HasFault {
	body := &methods.RemoveVirtualNicBody{}
	for i, nic := range s.NetworkInfo.Vnic {
		if nic.Device == req.Device {
			s.NetworkInfo.Vnic = append(s.NetworkInfo.Vnic[:i], s.NetworkInfo.Vnic[i+1:]...)
			body.Res = &types.RemoveVirtualNicResponse{}
			return body
		}
	}
	body.Fault_ = simulator.Fault(fmt.Sprintf("no virtual NIC %q", req.Device), &types.NotFound{})
	return body
}

// vmknicsOn lists the host's VMkernel adapters on ports of the switch with this UUID.
func vmknicsOn(host types.ManagedObjectReference, switchUUID string) []string {
	s := hostNetworks[host.Value]
	if s == nil {
		return nil
	}
	var devices []string
	for _, nic := range s.NetworkInfo.Vnic {
		if port := nic.Spec.DistributedVirtualPort; port != nil && port.SwitchUuid == switchUUID {
			devices = append(devices, nic.Device)
		}
	}
	return devices
}

// extendHostNetwork puts the wrapped network system in place of the host's own.
func extendHostNetwork(host *simulator.HostSystem) {
	inner, ok := simulator.Map.Get(*host.ConfigManager.NetworkSystem).(*simulator.HostNetworkSystem)
	if !ok {
		return
	}
	wrapped := &hostNetworkSystem{HostNetworkSystem: *inner, host: host}
	hostNetworks[host.Self.Value] = wrapped
	simulator.Map.Put(wrapped)
}

// dvsMemberHook wraps ReconfigureDvs tasks: a member removed while a VMkernel adapter of that host
// is on the switch is put back and the task fails with ResourceInUse. (The simulator's own code
// runs first and refuses VM ports; the spec is not visible from a task, so the check compares the
// members before and after, and undoes the membership change only.)
type dvsMemberHook struct{}

func (dvsMemberHook) Reference() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VcsimHarnessHook", Value: "dvs-members"}
}

func (dvsMemberHook) PutObject(obj mo.Reference) {
	task, ok := obj.(*simulator.Task)
	if !ok || task.Info.Entity == nil || !isReconfigureDvs(task.Info.DescriptionId) {
		return
	}
	ref := *task.Info.Entity
	run := task.Execute
	task.Execute = func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
		dvs, ok := simulator.Map.Get(ref).(*simulator.DistributedVirtualSwitch)
		if !ok {
			return run(t)
		}
		before := append([]types.ManagedObjectReference(nil), dvs.Summary.HostMember...)
		res, fault := run(t)
		if fault != nil {
			return res, fault
		}
		still := map[string]bool{}
		for _, member := range dvs.Summary.HostMember {
			still[member.Value] = true
		}
		for _, member := range before {
			if still[member.Value] {
				continue
			}
			if devices := vmknicsOn(member, dvs.Uuid); len(devices) > 0 {
				simulator.Map.Update(dvs, []types.PropertyChange{{Name: "summary.hostMember", Val: before}})
				return nil, &types.ResourceInUse{Type: "HostVirtualNic", Name: devices[0]}
			}
		}
		return res, nil
	}
}

// isReconfigureDvs: before or after the task-name hook renamed it (vcsim/task_names.go).
func isReconfigureDvs(descriptionID string) bool {
	return vcenterTaskID(descriptionID) == "DistributedVirtualSwitch.reconfigure"
}

func (dvsMemberHook) UpdateObject(mo.Reference, []types.PropertyChange) {}

func (dvsMemberHook) RemoveObject(types.ManagedObjectReference) {}

// registerDvsMemberHook installs the hook; main calls it once the model exists.
func registerDvsMemberHook() {
	simulator.Map.AddHandler(dvsMemberHook{})
}
