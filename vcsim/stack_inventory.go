package main

// -stack-inventory FILE: serve the inventory one stack file names instead of the VPX model's
// DC0/DC0_C0/DC0_C0_H0/LocalDS_0 names, so `python -m stacks preflight STACK` can pass against it.
//
// FILE is JSON written by `python -m stacks.tools.simulator` from the stack file (it also plants
// the folder and templates over the API once the harness serves):
//
//	{"datacenter": "Datacenter", "cluster": "GPU-Cluster", "datastore": "datastore1",
//	 "datastoreFreeGb": 10240, "network": "VM Network",
//	 "hosts": [{"name": "esxi-01...", "esxiVersion": "8.0.3", "memoryMb": 262144,
//	            "gpus": [{"deviceName": "NVIDIA L40S", "memoryMb": 49152}, ...],
//	            "vgpuProfiles": ["nvidia_l40s-48c", ...]}, ...]}
//
// datastoreFreeGb, gpus and vgpuProfiles are optional (the model's free space, one Tesla T4, the
// -vgpu-profiles flag); each is a property vCenter reports and a site differs in
// (DatastoreSummary.freeSpace, HostConfigInfo.graphicsInfo[], HostConfigInfo.sharedPassthruGpuTypes).
//
// The model is built with exactly one datacenter, one cluster of len(hosts) hosts, no standalone
// host, one local datastore and no VMs, then renamed before it serves. Renaming in place (rather
// than through Rename_Task) is needed because 0.24's simulator has no Rename_Task for hosts and
// no RenameDatastore, and because a host's ESXi version and memory size have no API setter at all.
// No VM exists yet, so no file path still names the model's datastore.

import (
	"encoding/json"
	"fmt"
	"io/ioutil"
	"sort"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
)

// stackHost is one ESXi host of the stack file.
type stackHost struct {
	Name        string `json:"name"`
	EsxiVersion string `json:"esxiVersion"`
	MemoryMb    int64  `json:"memoryMb"`
	// The host's GPUs as HostConfigInfo.graphicsInfo[] lists them (HostGraphicsInfo.deviceName,
	// memorySizeInKB): one entry per physical GPU. Empty: the one Tesla T4 of graphics.go.
	Gpus []stackGpu `json:"gpus,omitempty"`
	// HostConfigInfo.sharedPassthruGpuTypes of this host (what its GPUs offer); nil: -vgpu-profiles.
	VgpuProfiles []string `json:"vgpuProfiles,omitempty"`
}

// stackGpu is one physical GPU of a host.
type stackGpu struct {
	DeviceName string `json:"deviceName"`
	MemoryMb   int64  `json:"memoryMb"`
}

// stackInventory is what -stack-inventory reads.
type stackInventory struct {
	Datacenter string      `json:"datacenter"`
	Cluster    string      `json:"cluster"`
	Datastore  string      `json:"datastore"`
	Network    string      `json:"network"`
	Hosts      []stackHost `json:"hosts"`
	// The datastore's capacity and free space in GB (DatastoreSummary.capacity, freeSpace). 0:
	// the simulator's own, the free space of the disk it runs on, from which it subtracts every
	// planted disk in full (thin or not): a stack with large disks on a small disk would read
	// as a datastore short of space that a real vSAN is not.
	DatastoreFreeGb int64 `json:"datastoreFreeGb,omitempty"`
}

// stackHosts: the hosts of -stack-inventory by name, for extendHost and the graphics manager,
// which build each host's devices after the model is renamed.
var stackHosts = map[string]stackHost{}

// readStackInventory parses and checks FILE; every missing field is named.
func readStackInventory(path string) (*stackInventory, error) {
	raw, err := ioutil.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var inv stackInventory
	if err := json.Unmarshal(raw, &inv); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for field, value := range map[string]string{
		"datacenter": inv.Datacenter, "cluster": inv.Cluster, "datastore": inv.Datastore, "network": inv.Network,
	} {
		if value == "" {
			return nil, fmt.Errorf("%s: %q is missing or empty", path, field)
		}
	}
	if len(inv.Hosts) == 0 {
		return nil, fmt.Errorf("%s: \"hosts\" is empty", path)
	}
	for i, h := range inv.Hosts {
		if h.Name == "" {
			return nil, fmt.Errorf("%s: hosts[%d].name is missing", path, i)
		}
	}
	return &inv, nil
}

// shapeModel sizes the VPX model to the stack's inventory (before Model.Create).
func (inv *stackInventory) shapeModel(model *simulator.Model) {
	model.Datacenter = 1
	model.Cluster = 1
	model.ClusterHost = len(inv.Hosts)
	model.Host = 0      // no standalone host: the stack names none
	model.Datastore = 1 // renamed below
	model.Machine = 0   // the templates are planted over the API, nothing else runs
	model.Pool = 0
	model.Portgroup = 0 // no DVS port groups: the stack's own switch must be free
	model.App = 0
	model.Pod = 0
}

// apply renames the created model's objects to the stack's names and sets each host's facts.
func (inv *stackInventory) apply() error {
	rename := func(kind, from, to string) error {
		for _, obj := range simulator.Map.All(kind) {
			entity := obj.Entity()
			if entity.Name == from || from == "" {
				entity.Name = to
				// vim.Network has a `name` property of its own besides ManagedEntity's (govmomi
				// vim25/mo/mo.go, type Network: `Name string mo:"name"`), and the property
				// collector serves that one: renaming only the entity left the stack's network
				// "not found" for preflight (issue 54) while the inventory tree showed it.
				if network, ok := obj.(*mo.Network); ok {
					network.Name = to
				}
				return nil
			}
		}
		return fmt.Errorf("-stack-inventory: no %s %q to rename to %q", kind, from, to)
	}
	if err := rename("Datacenter", "DC0", inv.Datacenter); err != nil {
		return err
	}
	if err := rename("ClusterComputeResource", "DC0_C0", inv.Cluster); err != nil {
		return err
	}
	if inv.Network != "VM Network" {
		if err := rename("Network", "VM Network", inv.Network); err != nil {
			return err
		}
	}
	// The model mounts its one local datastore on every host: one object per host's system,
	// all of them named LocalDS_0.
	renamed := false
	for _, obj := range simulator.Map.All("Datastore") {
		ds := obj.(*simulator.Datastore)
		if ds.Name == "LocalDS_0" {
			ds.Name = inv.Datastore
			ds.Summary.Name = inv.Datastore
			ds.Info.GetDatastoreInfo().Name = inv.Datastore
			renamed = true
		}
	}
	if !renamed {
		return fmt.Errorf("-stack-inventory: no datastore LocalDS_0 to rename to %q", inv.Datastore)
	}
	if inv.DatastoreFreeGb > 0 {
		free := inv.DatastoreFreeGb << 30
		for _, obj := range simulator.Map.All("Datastore") {
			ds := obj.(*simulator.Datastore)
			if ds.Name == inv.Datastore {
				ds.Summary.FreeSpace = free
				ds.Summary.Capacity = free * 2
				ds.Info.GetDatastoreInfo().FreeSpace = free
			}
		}
	}

	var hosts []*simulator.HostSystem
	for _, obj := range simulator.Map.All("HostSystem") {
		hosts = append(hosts, obj.(*simulator.HostSystem))
	}
	// DC0_C0_H0, DC0_C0_H1, ...: the stack's hosts in file order.
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].Name < hosts[j].Name })
	if len(hosts) != len(inv.Hosts) {
		return fmt.Errorf("-stack-inventory: the model has %d hosts, the stack names %d", len(hosts), len(inv.Hosts))
	}
	for i, spec := range inv.Hosts {
		host := hosts[i]
		stackHosts[spec.Name] = spec
		host.Name = spec.Name
		host.Summary.Config.Name = spec.Name
		if spec.EsxiVersion != "" {
			setEsxiVersion(host, map[string]string{spec.Name: spec.EsxiVersion})
		}
		if spec.MemoryMb > 0 {
			bytes := spec.MemoryMb << 20
			host.Hardware.MemorySize = bytes
			host.Summary.Hardware.MemorySize = bytes
		}
	}
	return nil
}
