// The host firewall with the ruleset methods our code calls: EnableRuleset, DisableRuleset and
// UpdateRuleset. govmomi 0.24's simulator has no UpdateRuleset (simulator/host_firewall_system.go
// has the other two only), so restricting a ruleset's allowed hosts failed with "not implemented".
//
// UpdateRuleset follows the vSphere API reference (HostFirewallSystem.UpdateRuleset,
// HostFirewallRulesetRulesetSpec): the spec's allowedHosts replaces the ruleset's; NotFound for an
// unknown ruleset id; an invalid address or network is refused with InvalidArgument, as ESXi
// refuses it.
package main

import (
	"fmt"
	"net"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// HostFirewall implements the vim HostFirewallSystem managed object for one host.
type HostFirewall struct {
	mo.HostFirewallSystem
}

func (f *HostFirewall) ruleset(id string) *types.HostFirewallRuleset {
	for i := range f.FirewallInfo.Ruleset {
		if f.FirewallInfo.Ruleset[i].Key == id {
			return &f.FirewallInfo.Ruleset[i]
		}
	}
	return nil
}

// EnableRuleset opens the ruleset's ports.
func (f *HostFirewall) EnableRuleset(req *types.EnableRuleset) soap.HasFault {
	body := &methods.EnableRulesetBody{}
	rs := f.ruleset(req.Id)
	if rs == nil {
		body.Fault_ = simulator.Fault(fmt.Sprintf("ruleset %q not found", req.Id), &types.NotFound{})
		return body
	}
	rs.Enabled = true
	body.Res = &types.EnableRulesetResponse{}
	return body
}

// DisableRuleset closes the ruleset's ports.
func (f *HostFirewall) DisableRuleset(req *types.DisableRuleset) soap.HasFault {
	body := &methods.DisableRulesetBody{}
	rs := f.ruleset(req.Id)
	if rs == nil {
		body.Fault_ = simulator.Fault(fmt.Sprintf("ruleset %q not found", req.Id), &types.NotFound{})
		return body
	}
	rs.Enabled = false
	body.Res = &types.DisableRulesetResponse{}
	return body
}

// UpdateRuleset replaces the ruleset's allowed hosts.
func (f *HostFirewall) UpdateRuleset(req *types.UpdateRuleset) soap.HasFault {
	body := &methods.UpdateRulesetBody{}
	rs := f.ruleset(req.Id)
	if rs == nil {
		body.Fault_ = simulator.Fault(fmt.Sprintf("ruleset %q not found", req.Id), &types.NotFound{})
		return body
	}
	allowed := req.Spec.AllowedHosts
	for _, address := range allowed.IpAddress {
		if net.ParseIP(address) == nil {
			body.Fault_ = simulator.Fault(fmt.Sprintf("invalid IP address %q", address),
				&types.InvalidArgument{InvalidProperty: "spec.allowedHosts.ipAddress"})
			return body
		}
	}
	for _, network := range allowed.IpNetwork {
		ip := net.ParseIP(network.Network)
		if ip == nil || network.PrefixLength < 0 || (ip.To4() != nil && network.PrefixLength > 32) || network.PrefixLength > 128 {
			body.Fault_ = simulator.Fault(fmt.Sprintf("invalid network %s/%d", network.Network, network.PrefixLength),
				&types.InvalidArgument{InvalidProperty: "spec.allowedHosts.ipNetwork"})
			return body
		}
	}
	copied := types.HostFirewallRulesetIpList{
		IpAddress: append([]string(nil), allowed.IpAddress...),
		IpNetwork: append([]types.HostFirewallRulesetIpNetwork(nil), allowed.IpNetwork...),
		AllIp:     allowed.AllIp,
	}
	rs.AllowedHosts = &copied
	body.Res = &types.UpdateRulesetResponse{}
	return body
}

// extendHostFirewall gives a host its own firewall system (rulesets copied, so hosts never share
// them: 0.24 copies esx.HostFirewallInfo by value, which shares the Ruleset slice), with the
// "pvrdma" ruleset added when missing.
func extendHostFirewall(host *simulator.HostSystem) {
	stock := simulator.Map.Get(*host.ConfigManager.FirewallSystem).(*simulator.HostFirewallSystem)
	info := *stock.FirewallInfo
	info.Ruleset = append([]types.HostFirewallRuleset(nil), stock.FirewallInfo.Ruleset...)
	f := &HostFirewall{}
	f.Self = types.ManagedObjectReference{Type: "HostFirewallSystem", Value: "firewallSystem-" + host.Self.Value}
	f.FirewallInfo = &info
	if f.ruleset("pvrdma") == nil {
		info.Ruleset = append(info.Ruleset, pvrdmaRuleset())
	}
	sortRulesets(info.Ruleset)
	simulator.Map.Put(f)
	ref := f.Reference()
	host.ConfigManager.FirewallSystem = &ref
}
