// The host service system (vim.host.ServiceSystem) with the one service our code restarts:
// "xorg", the X.Org server ESXi runs for host graphics. Restarting (or starting) it is when a
// new default graphics type takes effect (see graphics.go for VMware's procedure).
//
// govmomi 0.24's esx template names a HostServiceSystem in every host's configManager but
// registers none, so every call on it failed with ManagedObjectNotFound.
package main

import (
	"fmt"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// HostServiceSystem implements the vim HostServiceSystem managed object for one host.
type HostServiceSystem struct {
	mo.HostServiceSystem

	host *simulator.HostSystem
}

func newHostServiceSystem(host *simulator.HostSystem) *HostServiceSystem {
	s := &HostServiceSystem{host: host}
	s.Self = types.ManagedObjectReference{Type: "HostServiceSystem", Value: "serviceSystem-" + host.Self.Value}
	s.ServiceInfo.Service = []types.HostService{{
		Key:      "xorg",
		Label:    "X.Org Server",
		Required: false,
		Running:  true,
		Policy:   "on",
	}}
	return s
}

func (s *HostServiceSystem) find(id string) (*types.HostService, types.BaseMethodFault) {
	for i := range s.ServiceInfo.Service {
		if s.ServiceInfo.Service[i].Key == id {
			return &s.ServiceInfo.Service[i], nil
		}
	}
	return nil, &types.NotFound{}
}

// started runs what a (re)start of a service does on the host.
func (s *HostServiceSystem) started(service *types.HostService) {
	service.Running = true
	if service.Key != "xorg" {
		return
	}
	graphicsMu.Lock()
	defer graphicsMu.Unlock()
	if m := graphicsManagerOf(s.host.Self); m != nil {
		m.restartXorg()
	}
}

// RestartService restarts a service; for "xorg" the configured graphics types take effect on
// every device no running VM holds.
func (s *HostServiceSystem) RestartService(req *types.RestartService) soap.HasFault {
	body := &methods.RestartServiceBody{}
	service, fault := s.find(req.Id)
	if fault != nil {
		body.Fault_ = simulator.Fault(fmt.Sprintf("service %q not found", req.Id), fault)
		return body
	}
	s.started(service)
	body.Res = &types.RestartServiceResponse{}
	return body
}

// StartService starts a stopped service (a running one is left as it is, as ESXi does).
func (s *HostServiceSystem) StartService(req *types.StartService) soap.HasFault {
	body := &methods.StartServiceBody{}
	service, fault := s.find(req.Id)
	if fault != nil {
		body.Fault_ = simulator.Fault(fmt.Sprintf("service %q not found", req.Id), fault)
		return body
	}
	if !service.Running {
		s.started(service)
	}
	body.Res = &types.StartServiceResponse{}
	return body
}

// StopService stops a service.
func (s *HostServiceSystem) StopService(req *types.StopService) soap.HasFault {
	body := &methods.StopServiceBody{}
	service, fault := s.find(req.Id)
	if fault != nil {
		body.Fault_ = simulator.Fault(fmt.Sprintf("service %q not found", req.Id), fault)
		return body
	}
	service.Running = false
	body.Res = &types.StopServiceResponse{}
	return body
}

// RefreshServices has nothing to re-read in the simulator.
func (s *HostServiceSystem) RefreshServices(req *types.RefreshServices) soap.HasFault {
	return &methods.RefreshServicesBody{Res: &types.RefreshServicesResponse{}}
}

// extendHostServices gives a host its own service system.
func extendHostServices(host *simulator.HostSystem) {
	s := newHostServiceSystem(host)
	simulator.Map.Put(s)
	ref := s.Reference()
	host.ConfigManager.ServiceSystem = &ref
}
