// A VM's extraConfig as vCenter keeps it: one value per key, and a key sent with an empty value
// removed. The vSphere API reference (VirtualMachineConfigSpec.extraConfig): "If the key is
// already present, it will be reset with the new value provided. Otherwise, a new option is added.
// Keys with empty values will be removed." govmomi 0.24's simulator appends every entry of a
// ReconfigVM_Task (simulator/virtual_machine.go, applyExtraConfig), so a key sent twice is listed
// twice and a key sent empty stays, listed with an empty value: code that removes guestinfo keys
// (components/vsphere/guestinfo_scrub.py) would pass against it while leaving them in place on a
// real vCenter, or fail where vCenter succeeds.
package main

import (
	"fmt"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// settleExtraConfig rewrites the VM's extraConfig as vCenter would hold it after a reconfigure:
// the last value of each key, in the order keys first appeared, without the keys whose last value
// is empty.
func settleExtraConfig(vm *simulator.VirtualMachine) {
	simulator.Map.WithLock(vm, func() {
		last := map[string]types.BaseOptionValue{}
		var order []string
		for _, option := range vm.Config.ExtraConfig {
			key := option.GetOptionValue().Key
			if _, seen := last[key]; !seen {
				order = append(order, key)
			}
			last[key] = option
		}
		settled := []types.BaseOptionValue{}
		for _, key := range order {
			value := last[key].GetOptionValue().Value
			if value == nil || fmt.Sprint(value) == "" {
				continue
			}
			settled = append(settled, last[key])
		}
		vm.Config.ExtraConfig = settled
	})
}
