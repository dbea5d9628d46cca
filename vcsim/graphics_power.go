// vGPU VMs and the host's active graphics type at power-on.
//
// A VM with an NVIDIA vGPU (a VirtualPCIPassthrough with a vmiop backing) powers on only on a
// host whose GPU runs in Shared Direct mode *now*: NVIDIA's vGPU user guide for VMware vSphere
// ("Changing the Default Graphics Type in VMware vSphere 6.5 and Later") says VMs with a vGPU
// fail to start until the default graphics type is Shared Direct and Xorg has been restarted,
// with vCenter's graphics admission error, vim.fault.InsufficientGraphicsResourcesFault
// ("Graphics resources admission control failed", vSphere Web Services API). A configured but
// not yet active Shared Direct does not count: graphics.go keeps the two apart.
//
// Powered-on VMs using the GPU (vGPU, or vSGA 3D) hold it: they are listed in graphicsInfo[].vm, and an Xorg
// restart leaves a held GPU in its mode.
//
// The simulator's VirtualMachine cannot be wrapped (its code type-asserts *VirtualMachine), so
// this hooks the power tasks as the registry creates them: a registry handler sees every Task
// put into the inventory before it runs, and wraps its Execute.
package main

import (
	"fmt"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// hasVgpu reports whether a VM carries an NVIDIA vGPU device.
func hasVgpu(vm *simulator.VirtualMachine) bool {
	if vm.Config == nil {
		return false
	}
	for _, device := range vm.Config.Hardware.Device {
		if pci, ok := device.(*types.VirtualPCIPassthrough); ok {
			if _, vmiop := pci.Backing.(*types.VirtualPCIPassthroughVmiopBackingInfo); vmiop {
				return true
			}
		}
	}
	return false
}

// usesGpu reports whether a powered-on VM holds its host's GPU: a vGPU, or a 3D video card that
// renders on the host GPU (vSGA: use3dRenderer "hardware" or "automatic", vSphere Virtual Machine
// Administration, "3D Rendering Options").
func usesGpu(vm *simulator.VirtualMachine) bool {
	if hasVgpu(vm) {
		return true
	}
	if vm.Config == nil {
		return false
	}
	for _, device := range vm.Config.Hardware.Device {
		if card, ok := device.(*types.VirtualMachineVideoCard); ok && card.Enable3DSupport != nil && *card.Enable3DSupport {
			if card.Use3dRenderer == "hardware" || card.Use3dRenderer == "automatic" || card.Use3dRenderer == "" {
				return true
			}
		}
	}
	return false
}

// refreshGpuVMs recomputes graphicsInfo[].vm of one host from its powered-on VMs using the GPU.
func refreshGpuVMs(hostRef types.ManagedObjectReference) {
	host, ok := simulator.Map.Get(hostRef).(*simulator.HostSystem)
	if !ok {
		return
	}
	var holding []types.ManagedObjectReference
	for _, ref := range host.Vm {
		vm, ok := simulator.Map.Get(ref).(*simulator.VirtualMachine)
		if ok && vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn && usesGpu(vm) {
			holding = append(holding, ref)
		}
	}
	graphicsMu.Lock()
	defer graphicsMu.Unlock()
	if m := graphicsManagerOf(hostRef); m != nil {
		m.setGpuVMs(holding)
	}
}

// refusePowerOn is the graphics admission check vCenter makes before a vGPU VM powers on.
func refusePowerOn(vm *simulator.VirtualMachine) types.BaseMethodFault {
	if vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn || vm.Runtime.Host == nil || !hasVgpu(vm) {
		return nil // the simulator's own power-on answers (InvalidPowerState, ...)
	}
	graphicsMu.Lock()
	m := graphicsManagerOf(*vm.Runtime.Host)
	active := ""
	if m != nil {
		active = m.activeType()
	}
	graphicsMu.Unlock()
	if active == "sharedDirect" {
		return nil
	}
	fault := &types.InsufficientGraphicsResourcesFault{}
	fault.FaultMessage = []types.LocalizableMessage{{
		Key: "com.vmware.vim.vpxd.vmcheck.insufficientGraphicsResources",
		Message: fmt.Sprintf("VM %s has a vGPU, but the graphics device of host %s runs in %q mode, not "+
			"Shared Direct (restart Xorg after setting the default graphics type)", vm.Name, vm.Runtime.Host.Value, active),
	}}
	return fault
}

// gpuPowerHook is the registry handler that wraps the VM power tasks.
type gpuPowerHook struct{}

func (gpuPowerHook) Reference() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VcsimHarnessHook", Value: "gpu-power"}
}

func (gpuPowerHook) PutObject(obj mo.Reference) {
	task, ok := obj.(*simulator.Task)
	if !ok || task.Info.Entity == nil {
		return
	}
	entity := *task.Info.Entity
	run := task.Execute
	switch vcenterTaskID(task.Info.DescriptionId) { // before or after vcsim/task_names.go's hook
	case "VirtualMachine.powerOn":
		task.Execute = func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
			if vm, ok := simulator.Map.Get(entity).(*simulator.VirtualMachine); ok {
				if fault := refusePowerOn(vm); fault != nil {
					return nil, fault
				}
			}
			res, fault := run(t)
			refreshGpuVMsOf(entity)
			return res, fault
		}
	case "VirtualMachine.powerOff", "VirtualMachine.suspend", "VirtualMachine.destroy":
		task.Execute = func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
			host := hostOf(entity)
			res, fault := run(t)
			if host != nil {
				refreshGpuVMs(*host)
			}
			return res, fault
		}
	}
}

func (gpuPowerHook) UpdateObject(mo.Reference, []types.PropertyChange) {}

func (gpuPowerHook) RemoveObject(types.ManagedObjectReference) {}

func hostOf(vmRef types.ManagedObjectReference) *types.ManagedObjectReference {
	if vm, ok := simulator.Map.Get(vmRef).(*simulator.VirtualMachine); ok && vm.Runtime.Host != nil {
		host := *vm.Runtime.Host
		return &host
	}
	return nil
}

func refreshGpuVMsOf(vmRef types.ManagedObjectReference) {
	if host := hostOf(vmRef); host != nil {
		refreshGpuVMs(*host)
	}
}

// registerGpuPowerHook installs the hook; main calls it once the model exists.
func registerGpuPowerHook() {
	simulator.Map.AddHandler(gpuPowerHook{})
}
