"""ESXi's management services on the PVRDMA vmknic (issue 40 item 9): a WARN, never a change.

Every host of the stack has (or gets, at `pulumi up`) a VMkernel adapter on the RDMA subnet
(`hosts[].vmknicIp`). ESXi's firewall rulesets are host-wide, not per adapter (vSphere Security,
"ESXi Firewall Configuration"), so the management rulesets accept the RDMA subnet as they accept
any other unless their allowed list says otherwise: `vSphereClient` (TCP 443 and 902, the host's
API and its console/NFC) and `CIMSLP` (427, where SLP is on; VMware KB 76372 turns it off). A guest's
root or a host-network pod then reaches the hypervisor there. The stack does not change these
rulesets: their list must hold vCenter's address and the administrators' networks, which the stack
does not know, and a wrong list locks vCenter out of the host (docs/security.md). Preflight reads
each host's rulesets (`HostFirewallSystem.firewallInfo.ruleset[].allowedHosts`) and names every
host left open, with the esxcli fix.
"""

from __future__ import annotations

import ipaddress

from components.vcenter.inventory_model import Inventory, RulesetInfo
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.report import Report

MANAGEMENT_RULESETS = {"vSphereClient": "TCP 443, 902", "CIMSLP": "TCP/UDP 427"}
"""The management rulesets judged, with their ports (ESXi's default firewall ruleset list)."""


def _reaches_subnet(ruleset: RulesetInfo, subnet: ipaddress.IPv4Network | ipaddress.IPv6Network) -> list[str]:
    """The entries of a restricted allowed list that cover addresses of the RDMA subnet."""
    hits = []
    for entry in ruleset.allowed:
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue
        if network.version == subnet.version and network.overlaps(subnet):
            hits.append(entry)
    return hits


def fix_commands(host: str, rulesets: list[str]) -> str:
    steps = []
    for key in rulesets:
        if key == "CIMSLP":
            steps.append(
                "esxcli network firewall ruleset set --ruleset-id CIMSLP --enabled false (and stop slpd, "
                "VMware KB 76372) where nothing uses SLP, or restrict it as below"
            )
        else:
            steps.append(
                f"esxcli network firewall ruleset set --ruleset-id {key} --allowed-all false, then "
                f"esxcli network firewall ruleset allowedip add --ruleset-id {key} --ip-address <vCenter's "
                "address, then each administrators' network> (vCenter's address first, or vCenter loses the host)"
            )
    return f"on {host}: " + "; ".join(steps)


def check_management_rulesets(env: Environment, inv: Inventory, report: Report) -> None:
    subnet = env.rdma_network.subnet
    for index, spec in enumerate(env.hosts):
        host = inv.hosts.get(spec.name)
        if host is None:
            continue  # reported by the host checks
        path = ("hosts", index, "vmknicIp")
        if host.firewall is None:
            report.warn(
                path,
                f"could not read host {spec.name!r}'s firewall rulesets: whether its management services "
                f"accept the RDMA subnet {subnet} was not checked",
            )
            continue
        judged = [r for r in host.firewall if r.key in MANAGEMENT_RULESETS and r.enabled]
        open_all = [r.key for r in judged if r.all_ip]
        reaching = {r.key: _reaches_subnet(r, subnet) for r in judged if not r.all_ip}
        reaching = {key: hits for key, hits in reaching.items() if hits}
        problems = [f"{key} ({MANAGEMENT_RULESETS[key]}) accepts all addresses" for key in open_all]
        problems += [
            f"{key} ({MANAGEMENT_RULESETS[key]}) allows {', '.join(hits)}, which covers the RDMA subnet"
            for key, hits in reaching.items()
        ]
        if problems:
            report.warn(
                path,
                f"host {spec.name!r} has a vmknic on the RDMA subnet {subnet} ({spec.vmknic_ip}), and "
                f"{'; '.join(problems)}: a guest's root or a host-network pod reaches the hypervisor's "
                f"management services there. ESXi's rulesets are host-wide; restrict them yourself, "
                f"{fix_commands(spec.name, [*open_all, *reaching])} (docs/security.md)",
            )
        else:
            shown = ", ".join(f"{r.key}: {', '.join(r.allowed) or 'nothing'}" for r in judged) or "all disabled"
            report.ok(path, f"host {spec.name!r}: management rulesets keep out the RDMA subnet ({shown})")
