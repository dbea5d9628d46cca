package main

// What preflight reads from ESXi hosts and govmomi 0.24's simulator does not model:
//
//   - RDMA devices, with -api-version 7.0 or later (vSphere API 7.0, HostNetworkInfo.rdmaDevice[], data object
//     HostRdmaDevice): one vmrdmaN per RDMA uplink this harness adds (-pnics),
//     backed by HostRdmaDevicePnicBacking whose pairedUplink is that vmnic
//     (a link to the PhysicalNic: its key on the wire), with the capability of
//     a ConnectX HCA (HostRdmaDeviceCapability roceV1Capable and roceV2Capable
//     true, iWarpCapable false), and PhysicalNic.rdmaDevice pointing back, as
//     ESXi 7.0+ reports them ("esxcli rdma device list" shows the same pairing).
//     -rdma-unpaired HOST:VMNIC leaves that vmnic without an RDMA device (a NIC
//     without RDMA, or without its RDMA driver); -rdma-no-roce HOST:VMNIC gives
//     its device iWARP only.
//   - A per-host ESXi version (HostConfigInfo.product, AboutInfo.version):
//     -esxi-version HOST=VERSION; every host runs the model's 6.5.0 otherwise.
//
// Reference: VMware vSphere Web Services API reference, data objects
// HostNetworkInfo (rdmaDevice, since 7.0), HostRdmaDevice, HostRdmaDevicePnicBacking,
// HostRdmaDeviceCapability, PhysicalNic (rdmaDevice), AboutInfo.

import (
	"flag"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

var (
	rdmaUnpairedFlag = flag.String("rdma-unpaired", "",
		"comma-separated HOST:VMNIC whose vmnic gets no RDMA device")
	rdmaNoRoceFlag = flag.String("rdma-no-roce", "",
		"comma-separated HOST:VMNIC whose RDMA device is iWARP-only (not RoCE)")
	esxiVersionFlag = flag.String("esxi-version", "",
		"comma-separated HOST=VERSION, e.g. DC0_C0_H1=7.0.3 (others keep the model's version)")
)

// hostNicSet parses "HOST:VMNIC,..." into a set of "HOST:VMNIC".
func hostNicSet(s string) map[string]bool {
	set := map[string]bool{}
	for _, item := range splitList(s) {
		set[item] = true
	}
	return set
}

// addRdmaDevices gives each listed RDMA uplink of a host its paired RDMA device.
func addRdmaDevices(host *simulator.HostSystem, rdmaPnics []string, unpaired, noRoce map[string]bool) {
	network := host.Config.Network
	if network == nil {
		return
	}
	var devices []types.HostRdmaDevice
	for i := range network.Pnic {
		pnic := &network.Pnic[i]
		wanted := false
		for _, name := range rdmaPnics {
			if pnic.Device == name {
				wanted = true
			}
		}
		id := host.Name + ":" + pnic.Device
		if !wanted || unpaired[id] {
			continue
		}
		name := fmt.Sprintf("vmrdma%d", len(devices))
		key := "key-vim.host.RdmaDevice-" + name
		roce := !noRoce[id]
		devices = append(devices, types.HostRdmaDevice{
			Key:         key,
			Device:      name,
			Driver:      "nmlx5_rdma",
			Description: "MT28800 Family [ConnectX-5 Ex]",
			Backing:     &types.HostRdmaDevicePnicBacking{PairedUplink: pnic.Key},
			ConnectionInfo: types.HostRdmaDeviceConnectionInfo{
				State:       "active",
				Mtu:         4096,
				SpeedInMbps: 100000,
			},
			Capability: types.HostRdmaDeviceCapability{
				RoceV1Capable: roce,
				RoceV2Capable: roce,
				IWarpCapable:  !roce,
			},
		})
		pnic.RdmaDevice = key
	}
	network.RdmaDevice = devices
}

// setEsxiVersion applies -esxi-version to one host.
func setEsxiVersion(host *simulator.HostSystem, versions map[string]string) {
	if v, ok := versions[host.Name]; ok {
		host.Config.Product.Version = v
		host.Config.Product.FullName = "VMware ESXi " + v
	}
}

// extendHostsForPreflight applies this file's additions to every host.
func extendHostsForPreflight(rdmaPnics []string) {
	unpaired := hostNicSet(*rdmaUnpairedFlag)
	noRoce := hostNicSet(*rdmaNoRoceFlag)
	versions := map[string]string{}
	for _, item := range splitList(*esxiVersionFlag) {
		if parts := strings.SplitN(item, "=", 2); len(parts) == 2 {
			versions[parts[0]] = parts[1]
		}
	}
	for _, obj := range simulator.Map.All("HostSystem") {
		host := obj.(*simulator.HostSystem)
		// The properties are 7.0 API: a 6.5 client (the model's default version) cannot
		// deserialize them, and a 6.5 vCenter does not report them.
		if apiAtLeast7() {
			addRdmaDevices(host, rdmaPnics, unpaired, noRoce)
		}
		setEsxiVersion(host, versions)
	}
}

var apiVersionFlag = flag.String("api-version", "",
	"vim25 API version the simulator claims (ServiceContent.about.apiVersion and /sdk/vimServiceVersions.xml); "+
		"e.g. 7.0.3.0 (vCenter 7.0 U3) lets a client read 7.0 properties such as HostNetworkInfo.rdmaDevice (default: the model's 6.5)")

// applyAPIVersion sets the API version a vCenter of that release reports (AboutInfo.apiVersion,
// which the simulator also serves as /sdk/vimServiceVersions.xml). Called before the model is
// created: the service copies the content when it starts.
func applyAPIVersion(model *simulator.Model) {
	if *apiVersionFlag != "" {
		// vCenter 7.0 U3 reports apiVersion "7.0.3.0" and version "7.0.3".
		model.ServiceContent.About.ApiVersion = *apiVersionFlag
		parts := strings.SplitN(*apiVersionFlag, ".", 4)
		if len(parts) > 3 {
			parts = parts[:3]
		}
		model.ServiceContent.About.Version = strings.Join(parts, ".")
	}
}

// apiAtLeast7 reports whether -api-version claims vSphere API 7.0 or later.
func apiAtLeast7() bool {
	major := strings.SplitN(*apiVersionFlag, ".", 2)[0]
	n := 0
	if _, err := fmt.Sscanf(major, "%d", &n); err != nil {
		return false
	}
	return n >= 7
}
