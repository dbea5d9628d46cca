// A clone that takes a while, as a real one does: with -clone-hold, CloneVM_Task answers at once
// with a running Task and the copy appears in the inventory only when the hold ends.
//
// A real vCenter copies the disks for seconds to minutes before the clone's VM exists; during
// that time a client that lost its answer (a reset connection, a killed process) finds no VM of
// that name, only the running task and the VmBeingClonedEvent vCenter posted when the clone
// started (vSphere API reference, VmBeingClonedEvent: destName, "the name of the destination
// virtual machine"; TaskInfo.eventChainId, "event chain ID that leads to the corresponding
// events"). govmomi 0.24's simulator clones synchronously (simulator/virtual_machine.go,
// CloneVMTask runs its task before it answers), so a client can never see a clone in flight.
//
// Here the task is made at once, its VmBeingClonedEvent posted with the task's eventChainId, and
// the simulator's own clone runs when the hold ends; a name taken meanwhile fails the task with
// DuplicateName, as vCenter's would.
package main

import (
	"bytes"
	"context"
	"flag"
	"io/ioutil"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

var cloneHold = flag.Duration("clone-hold", 0,
	"how long a CloneVM_Task runs before its copy exists (0: the simulator's synchronous clone)")

var cloneHoldOnly = flag.String("clone-hold-only", "",
	"hold only the clones whose name contains this text (empty: every clone)")

// heldName: whether a clone to this name takes -clone-hold.
func heldName(name string) bool {
	return *cloneHold > 0 && strings.Contains(name, *cloneHoldOnly)
}

// heldClone starts a clone that finishes after -clone-hold; returns its running task.
func heldClone(next http.Handler, r *http.Request, body []byte, source *simulator.VirtualMachine,
	folder *simulator.Folder, req *types.CloneVM_Task) types.ManagedObjectReference {
	task := simulator.CreateTask(source, "cloneVm", func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		if refusal := duplicateName(folder, req.Name); refusal != nil {
			return nil, refusal.fault
		}
		inner := r.Clone(context.Background())
		inner.Body = ioutil.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(httptest.NewRecorder(), inner)
		keepSourceConfig(source, folder, req.Name)
		placeClone(folder, req.Name, req.Spec.Location.Host)
		var clone mo.Entity
		simulator.Map.WithLock(folder, func() { clone = simulator.Map.FindByName(req.Name, folder.ChildEntity) })
		if clone == nil {
			return nil, &types.InvalidState{}
		}
		return clone.Entity().Self, nil
	})
	// Every field vCenter fills (pyVmomi refuses an event whose required arguments are empty).
	event := &types.VmBeingClonedEvent{DestName: req.Name}
	event.Vm = &types.VmEventArgument{Vm: source.Self}
	event.Vm.Name = source.Name
	event.DestFolder.Folder = folder.Self
	event.DestFolder.Name = folder.Name
	if source.Runtime.Host != nil {
		if host, ok := simulator.Map.Get(*source.Runtime.Host).(*simulator.HostSystem); ok {
			event.DestHost.Host = host.Self
			event.DestHost.Name = host.Name
			event.Host = &types.HostEventArgument{Host: host.Self}
			event.Host.Name = host.Name
		}
	}
	events := simulator.Map.EventManager()
	ctx := &simulator.Context{Session: &simulator.Session{UserSession: types.UserSession{UserName: "vcsim"}}}
	simulator.Map.WithLock(events, func() { events.PostEvent(ctx, &types.PostEvent{EventToPost: event}) })
	simulator.Map.Update(task, []types.PropertyChange{
		{Name: "info.eventChainId", Val: event.ChainId},
		{Name: "info.startTime", Val: time.Now()},
		{Name: "info.state", Val: types.TaskInfoStateRunning},
	})
	go func() {
		time.Sleep(*cloneHold)
		task.Run()
	}()
	return task.Self
}
