// vGPU placement at power-on: a physical GPU runs vGPUs of one profile at a time, up to the
// profile's count per GPU.
//
// NVIDIA Virtual GPU Software User Guide, "Virtual GPU Types" and "Valid Virtual GPU
// Configurations on a Single GPU": in the default equal-size mode "all vGPUs on a single
// physical GPU must be of the same type", and each type has a maximum number of vGPUs per GPU,
// its framebuffer divided into the board's (Tesla T4, 16 GB: T4-16C x1, T4-8C x2, T4-4C x4,
// T4-2C x8, T4-1C x16). A power-on that finds no GPU with room fails with vCenter's graphics
// admission fault, vim.fault.InsufficientGraphicsResourcesFault. (Mixed-size mode,
// HostGraphicsConfigDeviceType.vgpuMode "mixedSize", came with vSphere 8.0 U3; the harness
// models the default, equal size.)
//
// The harness hosts have one GPU each (graphics.go, a Tesla T4); its framebuffer is
// graphicsInfo's memorySizeInKB. Profiles of another board (grid_a100-40c in the A100 tests) are
// not counted: the harness has no model of that board's GPUs.
package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// profileBoard is a profile's board from its name (grid_t4-8c: t4), or "".
func profileBoard(profile string) string {
	if m := vgpuProfilePattern.FindStringSubmatch(profile); m != nil {
		return m[1]
	}
	return ""
}

// profileFramebufferGB is a profile's framebuffer from its name (grid_t4-8c: 8), or 0.
func profileFramebufferGB(profile string) int {
	m := vgpuProfilePattern.FindStringSubmatch(profile)
	if m == nil {
		return 0
	}
	gb, _ := strconv.Atoi(m[2])
	return gb
}

// A power-on rule of vm.go, so the refusal carries its message (a fault returned from a task's
// Execute gets only its Go type name as localizedMessage).
func init() { powerOnRules = append(powerOnRules, vgpuPlacementRule) }

// vgpuPlacementRule is the placement check for a vGPU VM about to power on, or nil.
func vgpuPlacementRule(vm *simulator.VirtualMachine) *vmRefusal {
	wanted := vmiopProfiles(vm)
	if len(wanted) == 0 || vm.Runtime.Host == nil {
		return nil
	}
	host, ok := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
	if !ok {
		return nil
	}
	graphicsMu.Lock()
	boardGB, board := 0, ""
	if m := graphicsManagerOf(host.Self); m != nil && len(m.device) > 0 {
		boardGB = int(m.device[0].MemorySizeInKB / (1024 * 1024))
		board = strings.ToLower(m.device[0].DeviceName)
	}
	graphicsMu.Unlock()
	if boardGB == 0 || !strings.HasSuffix(board, " "+profileBoard(wanted[0])) {
		return nil
	}

	// The vGPUs the host's GPU runs now: those of its other powered-on VMs.
	var running, holders []string
	for _, ref := range host.Vm {
		if ref == vm.Self {
			continue
		}
		other, ok := simulator.Map.Get(ref).(*simulator.VirtualMachine)
		if ok && other.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
			if profiles := vmiopProfiles(other); len(profiles) > 0 {
				running = append(running, profiles...)
				holders = append(holders, other.Name)
			}
		}
	}

	refuse := func(why string) *vmRefusal {
		msg := fmt.Sprintf("Graphics resources admission control failed: VM %s needs vGPU %s, but the GPU "+
			"of host %s %s (one vGPU profile per GPU; running: %s)", vm.Name, strings.Join(wanted, ", "), host.Name,
			why, strings.Join(holders, ", "))
		fault := &types.InsufficientGraphicsResourcesFault{}
		fault.FaultMessage = []types.LocalizableMessage{{
			Key: "com.vmware.vim.vpxd.vmcheck.insufficientGraphicsResources", Message: msg,
		}}
		return &vmRefusal{fault, msg}
	}
	profile := wanted[0]
	for _, p := range running {
		if p != profile {
			return refuse("runs " + p)
		}
	}
	for _, p := range wanted[1:] {
		if p != profile {
			return refuse(fmt.Sprintf("cannot run %s and %s side by side", profile, p))
		}
	}
	size := profileFramebufferGB(profile)
	if size == 0 || size > boardGB {
		return refuse(fmt.Sprintf("has %d GB of framebuffer", boardGB))
	}
	if limit := boardGB / size; len(running)+len(wanted) > limit {
		return refuse(fmt.Sprintf("already runs %d of the %d %s vGPUs it holds", len(running), limit, profile))
	}
	return nil
}
