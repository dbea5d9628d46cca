// VM rules of vCenter that govmomi 0.24's simulator does not enforce, and that our code depends
// on. Each rule cites the VMware/NVIDIA document it follows. They run in front of the
// simulator's SOAP handler (installed by main.go): a request that vCenter refuses gets a failed
// Task (or a SOAP fault) with vCenter's fault type; anything else goes on to the simulator.
//
//   - Names: a VM name is unique within its folder; CloneVM_Task/CreateVM_Task into a folder that
//     holds one fails with DuplicateName (vSphere API reference, Folder.CreateVM_Task and
//     VirtualMachine.CloneVM_Task: "DuplicateName: a virtual machine with the name already exists").
//   - Clones keep the source's virtual hardware version, firmware and extraConfig (a clone is a
//     copy of the source's configuration; the stock simulator resets version and firmware to its
//     defaults and drops the source's extraConfig).
//   - Hardware version: UpgradeVM_Task needs the VM powered off, never downgrades, and sets the
//     version asked for (vSphere API reference, VirtualMachine.UpgradeVM_Task: AlreadyUpgraded,
//     InvalidPowerState); the stock simulator always sets its own default.
//   - vGPU (a VirtualPCIPassthrough with a vmiop backing) is added or removed only while the VM
//     is powered off (NVIDIA Virtual GPU Software User Guide, "Configuring a vSphere VM with NVIDIA
//     vGPU": "power off the VM" first; vSphere has no PCI hot-add).
//   - Power-on of a vGPU VM needs all guest memory reserved (NVIDIA vGPU User Guide, VMware:
//     "all guest memory must be reserved"; vCenter's fault: "Invalid memory setting: memory
//     reservation (sched.mem.min) should be equal to memsize").
//   - Power-on of a vGPU VM on a large-BAR board (every board but T4, M10, M60 among NVIDIA's
//     vGPU boards) needs EFI firmware, pciPassthru.use64bitMMIO=TRUE and
//     pciPassthru.64bitMMIOSizeGB at least the vGPUs' framebuffer total rounded up to a power of
//     two (VMware KB 2142307, "VMware vSphere VMDirectPath I/O: Requirements for Platforms and
//     Devices"; NVIDIA vGPU User Guide, "Requirements for Using vGPU on GPUs Requiring 64 GB or
//     More of MMIO Space"). Other files may add power-on rules to powerOnRules.
//   - extraConfig: one value per key, and a key sent empty removed (vcsim/extra_config.go).
//   - VMware Tools: not running at power-on; running toolsBootDelay after it (a guest boots
//     before Tools answer); stopped at power-off. ShutdownGuest without running Tools fails with
//     ToolsUnavailable (vSphere API reference, VirtualMachine.ShutdownGuest).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/ioutil"
	"math/bits"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

var toolsBootDelay = flag.Duration("tools-boot-delay", time.Second,
	"how long after a power-on VMware Tools start answering in the guest")

// vmRefusal is a fault vCenter would raise, with its message.
type vmRefusal struct {
	fault types.BaseMethodFault
	msg   string
}

// powerOnRules run before a VM powers on, under the VM's lock. The first refusal wins.
var powerOnRules = []func(vm *simulator.VirtualMachine) *vmRefusal{
	vgpuMemoryRule,
	vgpuLargeBarRule,
}

// vGPU profile names: grid_<board>-[<MIG slices>-]<framebuffer GB><series letter>.
var vgpuProfilePattern = regexp.MustCompile(`^grid_([a-z0-9]+)-(?:\d+-)?(\d+)[a-z]$`)

// Boards whose vGPUs fit under 4 GB of MMIO (VMware KB 2142307 lists 16 GB BARs and up).
var smallBarBoards = map[string]bool{"t4": true, "m10": true, "m60": true}

func vmiopProfiles(vm *simulator.VirtualMachine) []string {
	var profiles []string
	for _, device := range vm.Config.Hardware.Device {
		if pci, ok := device.(*types.VirtualPCIPassthrough); ok {
			if backing, ok := pci.Backing.(*types.VirtualPCIPassthroughVmiopBackingInfo); ok {
				profiles = append(profiles, backing.Vgpu)
			}
		}
	}
	return profiles
}

func extraConfigValue(vm *simulator.VirtualMachine, key string) string {
	value := ""
	for _, option := range vm.Config.ExtraConfig {
		if o := option.GetOptionValue(); o.Key == key {
			value = fmt.Sprint(o.Value) // the last entry wins: 0.24 appends
		}
	}
	return value
}

func vgpuMemoryRule(vm *simulator.VirtualMachine) *vmRefusal {
	if len(vmiopProfiles(vm)) == 0 {
		return nil
	}
	size := int64(vm.Config.Hardware.MemoryMB)
	var reserved int64
	if vm.Config.MemoryAllocation != nil && vm.Config.MemoryAllocation.Reservation != nil {
		reserved = *vm.Config.MemoryAllocation.Reservation
	}
	if reserved >= size || (vm.Config.MemoryReservationLockedToMax != nil && *vm.Config.MemoryReservationLockedToMax) {
		return nil
	}
	msg := fmt.Sprintf("Invalid memory setting: memory reservation (sched.mem.min) should be equal to memsize(%d).", size)
	return &vmRefusal{&types.GenericVmConfigFault{Reason: msg}, msg}
}

func vgpuLargeBarRule(vm *simulator.VirtualMachine) *vmRefusal {
	total := 0
	var large []string
	for _, profile := range vmiopProfiles(vm) {
		m := vgpuProfilePattern.FindStringSubmatch(profile)
		if m == nil || smallBarBoards[m[1]] {
			continue
		}
		gb, _ := strconv.Atoi(m[2])
		total += gb
		large = append(large, profile)
	}
	if len(large) == 0 {
		return nil
	}
	need := 1 << bits.Len(uint(total-1)) // the total rounded up to a power of two
	var problems []string
	if vm.Config.Firmware != string(types.GuestOsDescriptorFirmwareTypeEfi) {
		problems = append(problems, fmt.Sprintf("firmware is %q, not efi", vm.Config.Firmware))
	}
	if !strings.EqualFold(extraConfigValue(vm, "pciPassthru.use64bitMMIO"), "TRUE") {
		problems = append(problems, "pciPassthru.use64bitMMIO is not TRUE")
	}
	if size, err := strconv.Atoi(extraConfigValue(vm, "pciPassthru.64bitMMIOSizeGB")); err != nil || size < need {
		problems = append(problems, fmt.Sprintf("pciPassthru.64bitMMIOSizeGB is %q, below %d", extraConfigValue(vm, "pciPassthru.64bitMMIOSizeGB"), need))
	}
	if len(problems) == 0 {
		return nil
	}
	msg := fmt.Sprintf("Module DevicePowerOn power on failed: vGPU %s needs 64-bit MMIO (VMware KB 2142307): %s",
		strings.Join(large, ", "), strings.Join(problems, "; "))
	return &vmRefusal{&types.GenericVmConfigFault{Reason: msg}, msg}
}

// toolsClock remembers each VM's power generation, so a Tools start scheduled for an earlier
// boot does not fire after the VM was powered off and on again.
var toolsClock = struct {
	sync.Mutex
	boot map[types.ManagedObjectReference]int
}{boot: map[types.ManagedObjectReference]int{}}

func setTools(vm *simulator.VirtualMachine, running bool) {
	status := types.VirtualMachineToolsRunningStatusGuestToolsNotRunning
	tools := types.VirtualMachineToolsStatusToolsNotRunning
	if running {
		status = types.VirtualMachineToolsRunningStatusGuestToolsRunning
		tools = types.VirtualMachineToolsStatusToolsOk
	}
	if vm.Guest == nil {
		vm.Guest = &types.GuestInfo{}
	}
	vm.Guest.ToolsRunningStatus = string(status)
	vm.Guest.ToolsStatus = tools
}

func toolsAfterPower(vm *simulator.VirtualMachine) {
	toolsClock.Lock()
	toolsClock.boot[vm.Self]++
	generation := toolsClock.boot[vm.Self]
	toolsClock.Unlock()
	simulator.Map.WithLock(vm, func() { setTools(vm, false) })
	go func() {
		time.Sleep(*toolsBootDelay)
		toolsClock.Lock()
		current := toolsClock.boot[vm.Self]
		toolsClock.Unlock()
		simulator.Map.WithLock(vm, func() {
			if current == generation && vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
				setTools(vm, true)
			}
		})
	}()
}

// vmRules is the http.Handler in front of the simulator's /sdk handler.
type vmRules struct {
	next http.Handler
}

func strictVMs(next http.Handler) http.Handler { return &vmRules{next: next} }

func (h *vmRules) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		h.next.ServeHTTP(w, r)
		return
	}
	body, err := ioutil.ReadAll(r.Body)
	_ = r.Body.Close()
	r.Body = ioutil.NopCloser(bytes.NewReader(body))
	if err != nil {
		h.next.ServeHTTP(w, r)
		return
	}
	method, err := simulator.UnmarshalBody(types.TypeFunc(), body)
	if err != nil {
		h.next.ServeHTTP(w, r)
		return
	}
	switch req := method.Body.(type) {
	case *types.PowerOnVM_Task:
		vm := lookupVM(req.This)
		if vm == nil {
			break
		}
		var refusal *vmRefusal
		simulator.Map.WithLock(vm, func() {
			if vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn || vm.Config.Template {
				return // the simulator's own answer (InvalidPowerState, InvalidState)
			}
			for _, rule := range powerOnRules {
				if refusal = rule(vm); refusal != nil {
					return
				}
			}
		})
		if refusal != nil {
			taskResponse(w, "PowerOnVM_Task", failedTask(vm, "powerOn", refusal))
			return
		}
		h.next.ServeHTTP(w, r)
		if vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
			toolsAfterPower(vm)
		}
		return
	case *types.PowerOffVM_Task:
		h.next.ServeHTTP(w, r)
		if vm := lookupVM(req.This); vm != nil {
			toolsAfterPower(vm)
		}
		return
	case *types.ShutdownGuest:
		vm := lookupVM(req.This)
		if vm == nil {
			break
		}
		running := false
		simulator.Map.WithLock(vm, func() {
			running = vm.Guest != nil && vm.Guest.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
		})
		if !running && vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
			soapFault(w, "ToolsUnavailable", fmt.Sprintf("Cannot complete operation because VMware Tools is not running in this virtual machine (%s).", vm.Name))
			return
		}
		h.next.ServeHTTP(w, r)
		toolsAfterPower(vm)
		return
	case *types.UpgradeVM_Task:
		if vm := lookupVM(req.This); vm != nil {
			taskResponse(w, "UpgradeVM_Task", upgrade(vm, req.Version))
			return
		}
	case *types.ReconfigVM_Task:
		if vm := lookupVM(req.This); vm != nil {
			if refusal := pciHotplug(vm, &req.Spec); refusal != nil {
				taskResponse(w, "ReconfigVM_Task", failedTask(vm, "reconfigVm", refusal))
				return
			}
			h.next.ServeHTTP(w, r) // the simulator's task runs to its end before it answers
			if len(req.Spec.ExtraConfig) > 0 {
				settleExtraConfig(vm) // vcsim/extra_config.go: vCenter's extraConfig rules
			}
			return
		}
	case *types.CloneVM_Task:
		source := lookupVM(req.This)
		folder := lookupFolder(req.Folder)
		if source == nil || folder == nil {
			break
		}
		if refusal := duplicateName(folder, req.Name); refusal != nil {
			taskResponse(w, "CloneVM_Task", failedTask(source, "cloneVm", refusal))
			return
		}
		if heldName(req.Name) { // vcsim/clone_hold.go
			taskResponse(w, "CloneVM_Task", heldClone(h.next, r, body, source, folder, req))
			return
		}
		h.next.ServeHTTP(w, r)
		keepSourceConfig(source, folder, req.Name)
		placeClone(folder, req.Name, req.Spec.Location.Host)
		return
	case *types.ReconfigureDvs_Task:
		if dvs := lookupDVS(req.This); dvs != nil { // vcsim/dvs_reconfigure.go
			taskResponse(w, "ReconfigureDvs_Task", reconfigureDvs(dvs, req))
			return
		}
	case *types.CreateVM_Task:
		if folder := lookupFolder(req.This); folder != nil {
			if refusal := duplicateName(folder, req.Config.Name); refusal != nil {
				taskResponse(w, "CreateVM_Task", failedTask(folder, "createVm", refusal))
				return
			}
		}
	}
	h.next.ServeHTTP(w, r)
}

func lookupVM(ref types.ManagedObjectReference) *simulator.VirtualMachine {
	vm, _ := simulator.Map.Get(ref).(*simulator.VirtualMachine)
	return vm
}

func lookupFolder(ref types.ManagedObjectReference) *simulator.Folder {
	folder, _ := simulator.Map.Get(ref).(*simulator.Folder)
	return folder
}

func duplicateName(folder *simulator.Folder, name string) *vmRefusal {
	var found mo.Entity
	simulator.Map.WithLock(folder, func() { found = simulator.Map.FindByName(name, folder.ChildEntity) })
	if found == nil {
		return nil
	}
	return &vmRefusal{
		&types.DuplicateName{Name: name, Object: found.Entity().Self},
		fmt.Sprintf("The name '%s' already exists.", name),
	}
}

// keepSourceConfig gives a fresh clone the source's hardware version, firmware and extraConfig,
// as vCenter's clone does (the clone's own extraConfig from the clone spec wins).
func keepSourceConfig(source *simulator.VirtualMachine, folder *simulator.Folder, name string) {
	var version, firmware string
	var extra []types.BaseOptionValue
	simulator.Map.WithLock(source, func() {
		version, firmware = source.Config.Version, source.Config.Firmware
		extra = append(extra, source.Config.ExtraConfig...)
	})
	var clone *simulator.VirtualMachine
	simulator.Map.WithLock(folder, func() {
		clone, _ = simulator.Map.FindByName(name, folder.ChildEntity).(*simulator.VirtualMachine)
	})
	if clone == nil {
		return
	}
	simulator.Map.WithLock(clone, func() {
		clone.Config.Version, clone.Config.Firmware = version, firmware
		own := map[string]bool{}
		for _, option := range clone.Config.ExtraConfig {
			own[option.GetOptionValue().Key] = true
		}
		merged := []types.BaseOptionValue{}
		for _, option := range extra {
			if !own[option.GetOptionValue().Key] {
				merged = append(merged, option)
			}
		}
		clone.Config.ExtraConfig = append(merged, clone.Config.ExtraConfig...)
	})
}

// placeClone puts a fresh clone on the host its RelocateSpec names, as vCenter does
// (VirtualMachineRelocateSpec.host: "the target host for the virtual machine"); 0.24's simulator
// leaves every clone on its source's host, which would crowd one host's GPU with every vGPU
// worker (vgpu_capacity.go).
func placeClone(folder *simulator.Folder, name string, target *types.ManagedObjectReference) {
	if target == nil {
		return
	}
	to, ok := simulator.Map.Get(*target).(*simulator.HostSystem)
	if !ok {
		return
	}
	var clone *simulator.VirtualMachine
	simulator.Map.WithLock(folder, func() {
		clone, _ = simulator.Map.FindByName(name, folder.ChildEntity).(*simulator.VirtualMachine)
	})
	if clone == nil || clone.Runtime.Host == nil || *clone.Runtime.Host == to.Self {
		return
	}
	if from, ok := simulator.Map.Get(*clone.Runtime.Host).(*simulator.HostSystem); ok {
		simulator.Map.RemoveReference(from, &from.Vm, clone.Self)
	}
	simulator.Map.AppendReference(to, &to.Vm, clone.Self)
	simulator.Map.WithLock(clone, func() {
		host := to.Self
		clone.Runtime.Host = &host
		clone.Summary.Runtime.Host = &host
	})
}

func hardwareNumber(version string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(version, "vmx-"))
	return n
}

func upgrade(vm *simulator.VirtualMachine, target string) types.ManagedObjectReference {
	var refusal *vmRefusal
	simulator.Map.WithLock(vm, func() {
		current := vm.Config.Version
		switch {
		case vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff:
			refusal = &vmRefusal{&types.InvalidPowerState{
				RequestedState: types.VirtualMachinePowerStatePoweredOff,
				ExistingState:  vm.Runtime.PowerState,
			}, "The virtual hardware of a powered-on virtual machine cannot be upgraded."}
		case target != "" && hardwareNumber(target) == 0:
			refusal = &vmRefusal{&types.InvalidArgument{InvalidProperty: "version"},
				fmt.Sprintf("A specified parameter was not correct: version %q", target)}
		case target != "" && hardwareNumber(target) <= hardwareNumber(current):
			refusal = &vmRefusal{&types.AlreadyUpgraded{},
				fmt.Sprintf("Virtual machine compatibility is already %s; it cannot be changed to %s (no downgrade).", current, target)}
		}
	})
	if refusal != nil {
		return failedTask(vm, "upgradeVm", refusal)
	}
	task := simulator.CreateTask(vm, "upgradeVm", func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		if target != "" {
			simulator.Map.WithLock(vm, func() { vm.Config.Version = target })
		}
		return nil, nil
	})
	return task.Run()
}

func pciHotplug(vm *simulator.VirtualMachine, spec *types.VirtualMachineConfigSpec) *vmRefusal {
	on := false
	simulator.Map.WithLock(vm, func() { on = vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff })
	if !on {
		return nil
	}
	for _, change := range spec.DeviceChange {
		if _, ok := change.GetVirtualDeviceConfigSpec().Device.(*types.VirtualPCIPassthrough); ok {
			return &vmRefusal{&types.InvalidPowerState{
				RequestedState: types.VirtualMachinePowerStatePoweredOff,
				ExistingState:  vm.Runtime.PowerState,
			}, fmt.Sprintf("PCI devices (vGPU) of %s can only be added or removed while it is powered off.", vm.Name)}
		}
	}
	return nil
}
