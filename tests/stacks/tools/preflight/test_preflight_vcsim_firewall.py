"""Issue 40 item 9: preflight names each host whose management rulesets (vSphereClient, CIMSLP
when enabled) accept the RDMA subnet, against the govmomi simulator. Its hosts start with ESXi's
defaults (all addresses allowed); the planted inventory restricts them (conftest,
restrict_management_rulesets, through UpdateRuleset: vcsim/host_firewall.go), and these tests open
or change one host and put it back."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from .conftest import MANAGEMENT_ALLOWED, Planted, _find, restrict_management_rulesets
from .test_preflight_vcsim import BASE

pytestmark = pytest.mark.vcsim

ENV = "vsphere-gpu-cluster:environment"
HOSTS = ("DC0_C0_H0", "DC0_C0_H1")
"""BASE's hosts[0] and hosts[1]."""


@pytest.fixture
def firewall(planted: Planted) -> Iterator[Callable[[str], Any]]:
    """firewall(host) -> its HostFirewallSystem; both hosts are restricted again afterwards."""
    sim = planted.sim
    si = SmartConnect(protocol="http", host="127.0.0.1", port=sim.parts.port, user=sim.user, pwd=sim.password)
    try:
        yield lambda name: _find(si, vim.HostSystem, name).configManager.firewallSystem
    finally:
        for name in HOSTS:
            restrict_management_rulesets(si, name)
        Disconnect(si)


def allowed(*networks: str, all_ip: bool = False) -> Any:
    return vim.host.Ruleset.RulesetSpec(
        allowedHosts=vim.host.Ruleset.IpList(
            allIp=all_ip,
            ipNetwork=[
                vim.host.Ruleset.IpNetwork(network=n.split("/")[0], prefixLength=int(n.split("/")[1])) for n in networks
            ],
        )
    )


def warnings_for(lines: list[str], index: int) -> list[str]:
    return [line for line in lines if line.startswith(f"WARN    {ENV}.hosts[{index}].vmknicIp: ")]


def test_an_open_host_is_named_with_the_fix_and_a_restricted_one_is_not(preflight, firewall) -> None:
    opened = firewall(HOSTS[0])
    opened.UpdateRuleset(id="vSphereClient", spec=allowed(all_ip=True))  # ESXi's default
    opened.EnableRuleset(id="CIMSLP")

    code, lines = preflight(copy.deepcopy(BASE))

    assert code == 0, "\n".join(lines)  # a warning, not a blocker
    (warning,) = warnings_for(lines, 0)
    assert f"host {HOSTS[0]!r} has a vmknic on the RDMA subnet 192.168.0.0/24 (192.168.0.24)" in warning
    assert "vSphereClient (TCP 443, 902) accepts all addresses" in warning
    assert "CIMSLP (TCP/UDP 427) accepts all addresses" in warning
    assert "esxcli network firewall ruleset set --ruleset-id vSphereClient --allowed-all false" in warning
    assert "esxcli network firewall ruleset set --ruleset-id CIMSLP --enabled false" in warning
    assert not warnings_for(lines, 1), "\n".join(lines)
    assert (
        f"OK      {ENV}.hosts[1].vmknicIp: host {HOSTS[1]!r}: management rulesets keep out the RDMA subnet "
        f"(vSphereClient: {MANAGEMENT_ALLOWED})"
    ) in lines


def test_an_allowed_list_that_covers_the_rdma_subnet_is_still_open(preflight, firewall) -> None:
    firewall(HOSTS[1]).UpdateRuleset(id="vSphereClient", spec=allowed("10.20.0.0/24", "192.168.0.0/16"))

    _, lines = preflight(copy.deepcopy(BASE))

    (warning,) = warnings_for(lines, 1)
    assert "vSphereClient (TCP 443, 902) allows 192.168.0.0/16, which covers the RDMA subnet" in warning
    assert "10.20.0.0/24" not in warning.split("allows", 1)[1].split("which", 1)[0]
    assert not warnings_for(lines, 0)
