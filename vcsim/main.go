// Command vcsim-harness starts govmomi's vCenter simulator (the VPX model) on a
// loopback port for the vsphere-gpu-cluster tests, extended with what our
// pyvmomi code uses and govmomi 0.24's simulator lacks:
//
//   - a HostGraphicsManager per host whose configured type takes effect only
//     when Xorg restarts, a HostServiceSystem with the "xorg" service, and
//     vGPU power-on refused unless the active type is Shared Direct
//     (graphics.go, host_services.go, graphics_power.go), and a GPU running vGPUs of
//     one profile only, up to its count per GPU (vgpu_capacity.go),
//   - VMkernel adapters on distributed switch ports, and host removal from a
//     switch refused while they are attached (dvs_hosts.go),
//   - ReconfigureDvs_Task one at a time per switch (an overlapping one fails with
//     DvsOperationBulkFault) and refused for a stale configVersion (dvs_reconfigure.go),
//   - vGPU profiles offered by every host (HostConfigInfo.sharedPassthruGpuTypes),
//   - extra physical NICs (default vmnic4, vmnic5: ConnectX-style RDMA uplinks),
//   - the ESXi firewall ruleset "pvrdma" (TCP/UDP 28250), disabled by default, open to all
//     addresses, and HostFirewallSystem.UpdateRuleset (host_firewall.go),
//   - extraConfig as vCenter keeps it: one value per key, a key sent empty removed (extra_config.go),
//   - the host advanced option Net.PVRDMAVmknic (empty by default),
//   - HasPrivilegeOnEntities answered from the permissions set on the inventory, where the
//     simulator grants everything (privileges.go),
//   - per-host copies of the firewall and advanced option state: 0.24's
//     simulator shares one esx template between all hosts, so enabling a ruleset
//     on one host would flip it on every host.
//
// With -stack-inventory FILE it serves the datacenter, cluster, datastore, network and hosts one
// stack file names instead of the model's DC0/DC0_C0/... (vcsim/stack_inventory.go; used by
// scripts/simulator.sh for the `sim` stack).
//
// It prints one line "VCSIM_URL=http://user:pass@127.0.0.1:PORT/sdk" on stdout
// once it serves, then serves until it gets SIGINT/SIGTERM or stdin closes
// (with -exit-on-stdin-eof), so a test runner that dies does not leave it behind.
//
// Build (GOPATH mode, Debian's golang-github-vmware-govmomi-dev):
//
//	scripts/build-vcsim.sh   # writes build/vcsim-harness
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"io/ioutil"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// pvrdmaRuleset is the ESXi 6.5+ firewall ruleset for PVRDMA (TCP/UDP 28250).
func pvrdmaRuleset() types.HostFirewallRuleset {
	var rules []types.HostFirewallRule
	for _, proto := range []string{"tcp", "udp"} {
		for _, dir := range []types.HostFirewallRuleDirection{
			types.HostFirewallRuleDirectionInbound, types.HostFirewallRuleDirectionOutbound,
		} {
			rules = append(rules, types.HostFirewallRule{
				Port:      28250,
				Direction: dir,
				PortType:  types.HostFirewallRulePortTypeDst,
				Protocol:  proto,
			})
		}
	}
	return types.HostFirewallRuleset{
		Key:          "pvrdma",
		Label:        "pvrdma",
		Required:     false,
		Rule:         rules,
		Enabled:      false,
		AllowedHosts: &types.HostFirewallRulesetIpList{AllIp: true},
	}
}

func sortRulesets(rulesets []types.HostFirewallRuleset) {
	sort.Slice(rulesets, func(i, j int) bool { return rulesets[i].Key < rulesets[j].Key })
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// extendHost adds what the tests need to one simulated host.
func extendHost(host *simulator.HostSystem, profiles, pnics []string, graphicsDefault string) {
	// vGPU profiles the host offers (its own from -stack-inventory, else -vgpu-profiles).
	if spec, ok := stackHosts[host.Name]; ok && spec.VgpuProfiles != nil {
		profiles = spec.VgpuProfiles
	}
	host.Config.SharedPassthruGpuTypes = append([]string(nil), profiles...)

	// Physical NICs (RDMA uplinks) if missing.
	have := map[string]bool{}
	for _, p := range host.Config.Network.Pnic {
		have[p.Device] = true
	}
	for i, name := range pnics {
		if have[name] {
			continue
		}
		host.Config.Network.Pnic = append(host.Config.Network.Pnic, types.PhysicalNic{
			Key:    "key-vim.host.PhysicalNic-" + name,
			Device: name,
			Pci:    fmt.Sprintf("0000:5e:00.%d", i),
			Driver: "nmlx5_core",
			LinkSpeed: &types.PhysicalNicLinkInfo{
				SpeedMb: 100000,
				Duplex:  true,
			},
			Mac: fmt.Sprintf("0c:42:a1:00:%02x:%02x", len(host.Config.Network.Pnic)%256, i),
		})
	}

	// A private firewall with the pvrdma ruleset and UpdateRuleset (vcsim/host_firewall.go).
	extendHostFirewall(host)

	// Private advanced options, plus Net.PVRDMAVmknic (ESXi ships it empty).
	opts := simulator.Map.Get(*host.ConfigManager.AdvancedOption).(*simulator.OptionManager)
	var settings []types.BaseOptionValue
	hasPvrdma := false
	for _, o := range opts.Setting {
		v := *o.GetOptionValue()
		if v.Key == "Net.PVRDMAVmknic" {
			hasPvrdma = true
		}
		settings = append(settings, &v)
	}
	if !hasPvrdma {
		settings = append(settings, &types.OptionValue{Key: "Net.PVRDMAVmknic", Value: ""})
	}
	opts.Setting = settings

	// The graphics manager.
	gm := newHostGraphicsManager(host, graphicsDefault, profiles)
	simulator.Map.Put(gm)
	ref := gm.Reference()
	host.ConfigManager.GraphicsManager = &ref
	extendHostServices(host)
	extendHostNetwork(host)
}

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0: a free port)")
	clusters := flag.Int("cluster", 1, "clusters per datacenter")
	clusterHosts := flag.Int("host", 4, "hosts per cluster")
	standalone := flag.Int("standalone-host", 1, "standalone hosts per datacenter")
	machines := flag.Int("vm", 2, "VMs per resource pool")
	profilesFlag := flag.String("vgpu-profiles",
		"grid_t4-4c,grid_t4-8c,grid_t4-16c",
		"comma-separated vGPU profiles every host offers (default: the T4's C-series, NVIDIA's "+
			"vGPU types T4-16C, T4-8C and T4-4C; there is no T4-2C or T4-1C)")
	pnicsFlag := flag.String("pnics", "vmnic4,vmnic5", "comma-separated physical NICs to add to every host")
	graphicsDefault := flag.String("graphics-default", "shared",
		"initial host default graphics type: shared or sharedDirect")
	exitOnEOF := flag.Bool("exit-on-stdin-eof", false, "exit when stdin is closed (parent died)")
	serveTLS := flag.Bool("tls", false, "serve HTTPS, as vCenter does (govmomi simulator.Service.TLS: "+
		"httptest's StartTLS with its self-signed localhost certificate); default plain HTTP")
	quiet := flag.Bool("quiet", true, "discard the simulator's own log")
	username := flag.String("username", "user", "the only user name the simulator accepts")
	password := flag.String("password", "pass", "the only password the simulator accepts")
	stackInventoryFile := flag.String("stack-inventory", "",
		"JSON file naming the datacenter, cluster, datastore, network and hosts to serve "+
			"(vcsim/stack_inventory.go; written by `python -m stacks.tools.simulator`)")
	flag.Parse()

	if !graphicsTypes[*graphicsDefault] {
		log.Fatalf("-graphics-default must be shared or sharedDirect, not %q", *graphicsDefault)
	}
	if *quiet {
		log.SetOutput(ioutil.Discard)
	}

	model := simulator.VPX()
	model.Cluster = *clusters
	model.ClusterHost = *clusterHosts
	model.Host = *standalone
	model.Machine = *machines

	var stackInv *stackInventory
	if *stackInventoryFile != "" {
		var err error
		if stackInv, err = readStackInventory(*stackInventoryFile); err != nil {
			fmt.Fprintln(os.Stderr, "vcsim-harness: -stack-inventory:", err)
			os.Exit(2)
		}
		stackInv.shapeModel(model) // overrides -cluster, -host, -standalone-host, -vm
	}

	applyAPIVersion(model)                          // vcsim/preflight.go
	if err := applyMethodDelay(model); err != nil { // vcsim/method_delay.go
		fmt.Fprintln(os.Stderr, "vcsim-harness:", err)
		os.Exit(2)
	}
	if err := model.Create(); err != nil {
		fmt.Fprintln(os.Stderr, "vcsim-harness: create model:", err)
		os.Exit(1)
	}
	defer model.Remove()
	if stackInv != nil {
		// Before the hosts are extended: the RDMA and graphics flags name hosts by their final names.
		if err := stackInv.apply(); err != nil {
			fmt.Fprintln(os.Stderr, "vcsim-harness:", err)
			os.Exit(1)
		}
	}

	profiles := splitList(*profilesFlag)
	pnics := splitList(*pnicsFlag)
	for _, obj := range simulator.Map.All("HostSystem") {
		extendHost(obj.(*simulator.HostSystem), profiles, pnics, *graphicsDefault)
	}
	registerGpuPowerHook()
	registerDvsMemberHook()
	registerTaskNameHook()
	extendAuthorization() // vcsim/privileges.go
	extendHostsForPreflight(pnics) // vcsim/preflight.go

	// Loopback only, plain HTTP unless -tls: tests never leave the machine; benchmarks of the
	// plugin's throughput speak HTTPS as it does to vCenter (a TLS handshake per new connection).
	// Explicit credentials: the simulator then refuses other logins, as vCenter does (with its
	// default it accepts any non-empty user and password).
	address := net.JoinHostPort("127.0.0.1", strconv.Itoa(*port))
	// govmomi's NewServer panics when it cannot listen (simulator/internal/server.go,
	// newLocalListener): a busy -port would print a Go stack trace instead of the reason. Try the
	// address first and say it in one line; it is closed again at once for NewServer to take.
	if probe, err := net.Listen("tcp", address); err != nil {
		fmt.Fprintf(os.Stderr, "vcsim-harness: cannot listen on %s (%v): another program uses the port; "+
			"stop it or pass another -port (0: any free port)\n", address, err)
		os.Exit(2)
	} else {
		_ = probe.Close()
	}
	model.Service.Listen = &url.URL{
		Host: address,
		User: url.UserPassword(*username, *password),
	}
	if *serveTLS {
		// An empty config: govmomi's NewServer then starts httptest's TLS server
		// (simulator/simulator.go, `NewServer`: `ts.StartTLS()` when `s.TLS != nil`).
		model.Service.TLS = new(tls.Config)
	}
	server := model.Service.NewServer()
	defer server.Close()
	server.Config.Handler = strictVMs(server.Config.Handler) // vcsim/vm.go: vCenter's VM rules

	fmt.Printf("VCSIM_URL=%s\n", server.URL.String())
	_ = os.Stdout.Sync()

	done := make(chan os.Signal, 1)
	signal.Notify(done, syscall.SIGINT, syscall.SIGTERM)
	if *exitOnEOF {
		go func() {
			_, _ = io.Copy(ioutil.Discard, os.Stdin)
			done <- syscall.SIGTERM
		}()
	}
	<-done
}
