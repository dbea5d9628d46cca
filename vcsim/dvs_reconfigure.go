// ReconfigureDvs_Task as vCenter runs it: one at a time per switch, guarded by configVersion.
//
//   - A switch reconfigure takes a while on vCenter (it pushes the change to every member host),
//     and another ReconfigureDvs_Task of the same switch arriving meanwhile fails with
//     vim.fault.DvsOperationBulkFault, "Cannot complete a vSphere Distributed Switch operation for
//     one or more host members." That is what parallel host adds get (community.vmware issue 1989,
//     https://github.com/ansible-collections/community.vmware/issues/1989: hosts added to one switch
//     in parallel, some fail with that text; the maintainers' workaround is `throttle: 1`, one
//     at a time; govmomi issue 3230 and vmware/vic issues 4837, 7313 show the same text from
//     `govc dvs.add`). Here each reconfigure stays "running" for -dvs-reconfigure-hold, and a
//     second one of the same switch in that window fails so.
//   - DVSConfigSpec.configVersion "is required in reconfiguring a switch and should be set to the
//     same value as" the switch's config.configVersion (vSphere Web Services API, DVSConfigSpec);
//     a spec carrying another version is refused with vim.fault.ConcurrentAccess, "Cannot complete
//     operation due to concurrent modification by another operation." (the text vCenter gives for
//     a stale configVersion, vmware/pyvmomi issue 538). Every successful reconfigure moves the
//     version on, so a client that read it before another client's change is refused.
//
// govmomi 0.24's simulator (simulator/dvs.go) runs ReconfigureDvs_Task synchronously under the
// switch's lock, so overlapping calls simply queue up, and it never reads nor changes
// configVersion.
package main

import (
	"flag"
	"strconv"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
)

var dvsReconfigureHold = flag.Duration("dvs-reconfigure-hold", 300*time.Millisecond,
	"how long a ReconfigureDvs_Task runs; another reconfigure of the same switch meanwhile fails "+
		"with DvsOperationBulkFault (0: no overlap check)")

const dvsBulkFaultText = "Cannot complete a vSphere Distributed Switch operation for one or more host members."

// dvsRunning: the switches (by moref value) with a reconfigure task running now.
var dvsRunning = struct {
	sync.Mutex
	busy map[string]bool
}{busy: map[string]bool{}}

func lookupDVS(ref types.ManagedObjectReference) *simulator.DistributedVirtualSwitch {
	dvs, _ := simulator.Map.Get(ref).(*simulator.DistributedVirtualSwitch)
	return dvs
}

// refuseReconfigure is vCenter's answer to a reconfigure that cannot start now, or nil.
// Callers hold the switch's lock and dvsRunning.
func refuseReconfigure(dvs *simulator.DistributedVirtualSwitch, spec *types.DVSConfigSpec) *vmRefusal {
	if dvsRunning.busy[dvs.Self.Value] {
		fault := &types.DvsOperationBulkFault{}
		for _, member := range spec.Host {
			fault.HostFault = append(fault.HostFault, types.DvsOperationBulkFaultFaultOnHost{
				Host: member.Host,
				Fault: types.LocalizedMethodFault{
					Fault:            &types.DvsFault{},
					LocalizedMessage: "another operation on distributed switch " + dvs.Name + " is in progress",
				},
			})
		}
		return &vmRefusal{fault, dvsBulkFaultText}
	}
	if fault := missingPnics(spec); fault != nil {
		return &vmRefusal{fault, dvsBulkFaultText}
	}
	if current := dvs.Config.GetDVSConfigInfo().ConfigVersion; spec.ConfigVersion != current {
		return &vmRefusal{&types.ConcurrentAccess{},
			"Cannot complete operation due to concurrent modification by another operation. (configVersion " +
				strconv.Quote(spec.ConfigVersion) + " is not the switch's " + strconv.Quote(current) + ")"}
	}
	return nil
}

// reconfigureDvs answers ReconfigureDvs_Task: a failed task when vCenter would refuse it, else a
// task that runs for -dvs-reconfigure-hold and then applies the simulator's own reconfigure.
func reconfigureDvs(dvs *simulator.DistributedVirtualSwitch, req *types.ReconfigureDvs_Task) types.ManagedObjectReference {
	spec := req.Spec.GetDVSConfigSpec()
	var refusal *vmRefusal
	dvsRunning.Lock()
	simulator.Map.WithLock(dvs, func() { refusal = refuseReconfigure(dvs, spec) })
	if refusal == nil && *dvsReconfigureHold > 0 {
		dvsRunning.busy[dvs.Self.Value] = true
	}
	dvsRunning.Unlock()
	if refusal != nil {
		return failedTask(dvs, "reconfigureDvs", refusal)
	}

	task := simulator.CreateTask(dvs, "reconfigureDvs", func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		var fault types.BaseMethodFault
		simulator.Map.WithLock(dvs, func() {
			// The simulator's reconfigure (members, port groups), with the vmknic check of
			// dvs_hosts.go wrapped around its task.
			body := dvs.ReconfigureDvsTask(req).(*methods.ReconfigureDvs_TaskBody)
			inner := simulator.Map.Get(body.Res.Returnval).(*simulator.Task)
			if inner.Info.Error != nil {
				fault = inner.Info.Error.Fault
				return
			}
			info := dvs.Config.GetDVSConfigInfo()
			n, _ := strconv.Atoi(info.ConfigVersion)
			info.ConfigVersion = strconv.Itoa(n + 1)
		})
		dvsRunning.Lock()
		delete(dvsRunning.busy, dvs.Self.Value)
		dvsRunning.Unlock()
		return nil, fault
	})
	if *dvsReconfigureHold <= 0 {
		return task.Run()
	}
	simulator.Map.Update(task, []types.PropertyChange{
		{Name: "info.startTime", Val: time.Now()},
		{Name: "info.state", Val: types.TaskInfoStateRunning},
	})
	go func() {
		time.Sleep(*dvsReconfigureHold)
		task.Run()
	}()
	return task.Self
}

// missingPnics refuses a join or uplink edit that names a physical NIC the host does not have:
// the whole reconfigure fails (vCenter applies a spec entirely or not at all) with a
// DvsOperationBulkFault whose hostFault names that host and why, the shape vCenter gives a
// per-host failure (vSphere API reference, DvsOperationBulkFault: "Thrown if an operation on a
// vSphere Distributed Switch fails on one or more host members"; FaultOnHost: host, fault).
// govmomi 0.24's simulator takes any pnicDevice. Callers hold the switch's lock.
func missingPnics(spec *types.DVSConfigSpec) *types.DvsOperationBulkFault {
	var fault *types.DvsOperationBulkFault
	for _, member := range spec.Host {
		backing, ok := member.Backing.(*types.DistributedVirtualSwitchHostMemberPnicBacking)
		if !ok || member.Operation == string(types.ConfigSpecOperationRemove) {
			continue
		}
		host, ok := simulator.Map.Get(member.Host).(*simulator.HostSystem)
		if !ok {
			continue
		}
		have := map[string]bool{}
		for _, pnic := range host.Config.Network.Pnic {
			have[pnic.Device] = true
		}
		for _, pnic := range backing.PnicSpec {
			if have[pnic.PnicDevice] {
				continue
			}
			if fault == nil {
				fault = &types.DvsOperationBulkFault{}
			}
			fault.HostFault = append(fault.HostFault, types.DvsOperationBulkFaultFaultOnHost{
				Host: member.Host,
				Fault: types.LocalizedMethodFault{
					Fault:            &types.NotFound{},
					LocalizedMessage: "physical NIC " + pnic.PnicDevice + " not found on host " + host.Name,
				},
			})
			break
		}
	}
	return fault
}
