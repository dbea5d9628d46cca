// Host graphics as ESXi has it: a configured default graphics type, and an active type per
// graphics device that changes only when the host's Xorg service restarts.
//
// VMware's procedure, "Configuring Host Graphics" (vSphere Resource Management, 6.5 and later,
// https://docs.vmware.com/en/VMware-vSphere/6.5/com.vmware.vsphere.resmgmt.doc/GUID-E0862AED-BF69-4C85-A811-EEE626F63B48.html):
// "Virtual machines should be powered off." ... "After clicking OK, you must restart Xorg on the
// host." The ESXCLI reference says the same of `esxcli graphics device set`: "restart Xorg e.g.
// /etc/init.d/xorg restart for change to take effect". So:
//
//   - UpdateGraphicsConfig changes graphicsConfig (the configured value) and nothing else;
//   - graphicsInfo[].graphicsType (the active value, vim.host.GraphicsInfo) follows the configured
//     value when HostServiceSystem.RestartService("xorg") (or StartService) runs and no powered-on
//     VM uses the device (graphicsInfo[].vm is empty): a GPU held by running VMs keeps its mode;
//   - graphicsInfo[].vm lists the powered-on VMs holding a vGPU of the device;
//   - what a restart switched is not yet what the API shows: graphicsInfo[].graphicsType (of the
//     manager and of HostSystem.config) keeps the type it had at the last
//     HostGraphicsManager.RefreshGraphicsManager ("Refresh the available graphics information",
//     vSphere Web Services API / pyvmomi docs/vim/host/GraphicsManager.rst), so a client reads
//     the active type after refreshing. The device's own state (power-on admission,
//     IsSharedGraphicsActive) is live. graphicsConfig (what UpdateGraphicsConfig stored) and the
//     VM lists are shown at once: no source says otherwise, and preflight reads them so.
//
// govmomi 0.24's simulator has no HostGraphicsManager and no HostServiceSystem at all.
package main

import (
	"fmt"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Graphics types and shared passthru assignment policies of the vim API
// (HostGraphicsConfigGraphicsType, HostGraphicsConfigSharedPassthruAssignmentPolicy).
var (
	graphicsTypes     = map[string]bool{"shared": true, "sharedDirect": true}
	assignmentPolices = map[string]bool{"performance": true, "consolidation": true}
)

// graphicsMu guards the graphics state of every host (configured and active types, the VMs
// holding a GPU): it is read and written from the graphics manager, the service system and
// the power-on hook, which run under different per-object locks of the simulator.
var graphicsMu sync.Mutex

// graphicsManagers: the manager of each host, by the host's moref value.
var graphicsManagers = map[string]*HostGraphicsManager{}

// HostGraphicsManager implements the vim HostGraphicsManager managed object.
type HostGraphicsManager struct {
	mo.HostGraphicsManager

	host *simulator.HostSystem
	// device is the devices' real state; the embedded GraphicsInfo is what the API shows, with
	// graphicsType as of the last RefreshGraphicsManager.
	device []types.HostGraphicsInfo
}

func newHostGraphicsManager(host *simulator.HostSystem, defaultType string, profiles []string) *HostGraphicsManager {
	m := &HostGraphicsManager{host: host}
	m.Self = types.ManagedObjectReference{
		Type:  "HostGraphicsManager",
		Value: "graphicsManager-" + host.Self.Value,
	}
	m.GraphicsConfig = &types.HostGraphicsConfig{
		HostDefaultGraphicsType:        defaultType,
		SharedPassthruAssignmentPolicy: "performance",
	}
	m.SharedPassthruGpuTypes = append([]string(nil), profiles...)
	// A host booted with this configuration: the device is already in the configured mode.
	m.device = []types.HostGraphicsInfo{{
		DeviceName:     "NVIDIA Tesla T4",
		VendorName:     "NVIDIA Corporation",
		PciId:          "0000:3b:00.0",
		GraphicsType:   defaultType,
		MemorySizeInKB: 16 * 1024 * 1024,
	}}
	// The host's own GPUs from -stack-inventory (vcsim/stack_inventory.go): one graphicsInfo entry
	// per physical GPU, each on its own PCI bus, as ESXi lists a host with several boards.
	if spec, ok := stackHosts[host.Name]; ok && len(spec.Gpus) > 0 {
		m.device = nil
		for i, gpu := range spec.Gpus {
			m.device = append(m.device, types.HostGraphicsInfo{
				DeviceName:     gpu.DeviceName,
				VendorName:     "NVIDIA Corporation",
				PciId:          fmt.Sprintf("0000:%02x:00.0", 0x3b+0x20*i),
				GraphicsType:   defaultType,
				MemorySizeInKB: gpu.MemoryMb * 1024,
			})
		}
	}
	m.GraphicsInfo = append([]types.HostGraphicsInfo(nil), m.device...)
	graphicsMu.Lock()
	graphicsManagers[host.Self.Value] = m
	m.syncHost()
	graphicsMu.Unlock()
	return m
}

// configuredType is the type a device takes at the next Xorg restart: its per-device override
// (graphicsConfig.deviceType[]) or else the host default. Callers hold graphicsMu.
func (m *HostGraphicsManager) configuredType(pciID string) string {
	for _, d := range m.GraphicsConfig.DeviceType {
		if d.DeviceId == pciID && d.GraphicsType != "" {
			return d.GraphicsType
		}
	}
	return m.GraphicsConfig.HostDefaultGraphicsType
}

// syncHost mirrors the manager into HostSystem.config.graphicsConfig and graphicsInfo, as ESXi
// does. Callers hold graphicsMu.
func (m *HostGraphicsManager) syncHost() {
	cfg := *m.GraphicsConfig
	m.host.Config.GraphicsConfig = &cfg
	m.host.Config.GraphicsInfo = append([]types.HostGraphicsInfo(nil), m.GraphicsInfo...)
}

// activeType is the type the host's NVIDIA device runs in now. Callers hold graphicsMu.
func (m *HostGraphicsManager) activeType() string {
	for _, info := range m.device {
		if info.VendorName == "NVIDIA Corporation" {
			return info.GraphicsType
		}
	}
	return ""
}

// restartXorg applies the configured types to every device no running VM holds; the API shows
// them after the next RefreshGraphicsManager. Callers hold graphicsMu.
func (m *HostGraphicsManager) restartXorg() {
	for i := range m.device {
		if len(m.device[i].Vm) == 0 {
			m.device[i].GraphicsType = m.configuredType(m.device[i].PciId)
		}
	}
}

// setGpuVMs records which powered-on VMs hold a vGPU of this host's devices. Callers hold
// graphicsMu.
func (m *HostGraphicsManager) setGpuVMs(vms []types.ManagedObjectReference) {
	for i := range m.device {
		m.device[i].Vm = append([]types.ManagedObjectReference(nil), vms...)
	}
	for i := range m.GraphicsInfo {
		m.GraphicsInfo[i].Vm = append([]types.ManagedObjectReference(nil), vms...)
	}
	m.syncHost()
}

// UpdateGraphicsConfig validates and stores a HostGraphicsConfig. It changes the configured
// types only: the devices keep their mode until Xorg restarts.
func (m *HostGraphicsManager) UpdateGraphicsConfig(req *types.UpdateGraphicsConfig) soap.HasFault {
	body := &methods.UpdateGraphicsConfigBody{}
	graphicsMu.Lock()
	defer graphicsMu.Unlock()
	cfg := *m.GraphicsConfig

	if t := req.Config.HostDefaultGraphicsType; t != "" {
		if !graphicsTypes[t] {
			body.Fault_ = simulator.Fault(
				fmt.Sprintf("invalid hostDefaultGraphicsType %q", t),
				&types.InvalidArgument{InvalidProperty: "hostDefaultGraphicsType"})
			return body
		}
		cfg.HostDefaultGraphicsType = t
	}
	if p := req.Config.SharedPassthruAssignmentPolicy; p != "" {
		if !assignmentPolices[p] {
			body.Fault_ = simulator.Fault(
				fmt.Sprintf("invalid sharedPassthruAssignmentPolicy %q", p),
				&types.InvalidArgument{InvalidProperty: "sharedPassthruAssignmentPolicy"})
			return body
		}
		cfg.SharedPassthruAssignmentPolicy = p
	}
	if req.Config.DeviceType != nil {
		cfg.DeviceType = append([]types.HostGraphicsConfigDeviceType(nil), req.Config.DeviceType...)
	}

	m.GraphicsConfig = &cfg
	m.syncHost()

	body.Res = &types.UpdateGraphicsConfigResponse{}
	return body
}

// RefreshGraphicsManager shows the devices' current state in graphicsInfo.
func (m *HostGraphicsManager) RefreshGraphicsManager(req *types.RefreshGraphicsManager) soap.HasFault {
	graphicsMu.Lock()
	defer graphicsMu.Unlock()
	m.GraphicsInfo = append([]types.HostGraphicsInfo(nil), m.device...)
	for i := range m.GraphicsInfo {
		m.GraphicsInfo[i].Vm = append([]types.ManagedObjectReference(nil), m.device[i].Vm...)
	}
	m.syncHost()
	return &methods.RefreshGraphicsManagerBody{Res: &types.RefreshGraphicsManagerResponse{}}
}

// IsSharedGraphicsActive reports whether a device runs in shared (vSGA) mode now.
func (m *HostGraphicsManager) IsSharedGraphicsActive(req *types.IsSharedGraphicsActive) soap.HasFault {
	graphicsMu.Lock()
	defer graphicsMu.Unlock()
	active := false
	for _, info := range m.device {
		if info.GraphicsType == "shared" {
			active = true
		}
	}
	return &methods.IsSharedGraphicsActiveBody{
		Res: &types.IsSharedGraphicsActiveResponse{Returnval: active},
	}
}

// graphicsManagerOf returns the graphics manager of a host, or nil.
func graphicsManagerOf(host types.ManagedObjectReference) *HostGraphicsManager {
	return graphicsManagers[host.Value]
}
