"""PvrdmaHostSettings against the vCenter simulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter.errors import VsphereError
from components.vsphere.provider_base import RetryPolicy
from components.vsphere.pvrdma_host import PvrdmaHostSettingsProvider

pytestmark = pytest.mark.vcsim

FAST_RETRY = RetryPolicy(attempts=6, base_delay=0.1, max_delay=0.5, max_total=10)
NO_RETRY = RetryPolicy(attempts=1)


def _host_state(find: Callable[[Any, str], Any], name: str) -> tuple[str, bool]:
    host = find(vim.HostSystem, name)
    option = host.configManager.advancedOption.QueryOptions("Net.PVRDMAVmknic")[0].value
    enabled = next(r.enabled for r in host.configManager.firewallSystem.firewallInfo.ruleset if r.key == "pvrdma")
    return option, enabled


def _inputs(host_name: str, device: str = "vmk1") -> dict[str, Any]:
    return {"host_name": host_name, "vmknic_device": device}


@pytest.fixture
def provider(configured: Callable[..., Any]) -> PvrdmaHostSettingsProvider:
    return configured(PvrdmaHostSettingsProvider(retry=FAST_RETRY))


def test_create_sets_option_and_ruleset_then_read_shows_no_diff(
    provider: PvrdmaHostSettingsProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    created = provider.create(_inputs(host_name))

    assert created.id == f"pvrdma:{host_name}"
    assert _host_state(find, host_name) == ("vmk1", True)
    assert created.outs == {
        "host_name": host_name,
        "vmknic_device": "vmk1",
        "ruleset_enabled": True,
        "previous_vmknic": "",
        "previous_ruleset_enabled": False,
    }
    read = provider.read(created.id, created.outs)
    assert read.id == created.id
    assert read.outs == created.outs
    assert provider.diff(created.id, read.outs, _inputs(host_name)).changes is False


def test_create_is_idempotent(
    provider: PvrdmaHostSettingsProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    first = provider.create(_inputs(host_name))
    again = provider.create(_inputs(host_name))

    assert _host_state(find, host_name) == ("vmk1", True)
    assert (again.outs["vmknic_device"], again.outs["ruleset_enabled"]) == ("vmk1", True)
    assert first.outs["previous_vmknic"] == ""


@pytest.mark.parametrize(
    "drift",
    [
        pytest.param(
            lambda host: host.configManager.advancedOption.UpdateOptions(
                changedValue=[vim.option.OptionValue(key="Net.PVRDMAVmknic", value="vmk7")]
            ),
            id="vmknic-retagged",
        ),
        pytest.param(
            lambda host: host.configManager.firewallSystem.DisableRuleset(id="pvrdma"),
            id="ruleset-disabled",
        ),
    ],
)
def test_drift_is_detected_and_repaired(
    provider: PvrdmaHostSettingsProvider,
    host_name: str,
    find: Callable[[Any, str], Any],
    drift: Callable[[Any], None],
) -> None:
    created = provider.create(_inputs(host_name))
    drift(find(vim.HostSystem, host_name))  # someone edits the host in vCenter

    refreshed = provider.read(created.id, created.outs)
    assert (refreshed.outs["vmknic_device"], refreshed.outs["ruleset_enabled"]) != ("vmk1", True)
    diff = provider.diff(created.id, refreshed.outs, _inputs(host_name))
    assert diff.changes is True
    assert diff.replaces == []

    updated = provider.update(created.id, refreshed.outs, _inputs(host_name))
    assert _host_state(find, host_name) == ("vmk1", True)
    # What was there before this stack touched the host is still remembered.
    assert updated.outs["previous_vmknic"] == ""
    assert updated.outs["previous_ruleset_enabled"] is False
    again = provider.read(created.id, updated.outs)
    assert provider.diff(created.id, again.outs, _inputs(host_name)).changes is False


def test_update_moves_the_tag_to_another_vmknic(
    provider: PvrdmaHostSettingsProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    created = provider.create(_inputs(host_name, "vmk1"))
    assert provider.diff(created.id, created.outs, _inputs(host_name, "vmk2")).changes is True

    provider.update(created.id, created.outs, _inputs(host_name, "vmk2"))

    assert _host_state(find, host_name) == ("vmk2", True)


@pytest.mark.parametrize(
    ("before", "ruleset_before"),
    [(("", False)), (("vmk5", True))],
    ids=["esxi-defaults", "previously-configured"],
)
def test_delete_restores_previous_values(
    provider: PvrdmaHostSettingsProvider,
    host_name: str,
    find: Callable[[Any, str], Any],
    before: str,
    ruleset_before: bool,
) -> None:
    host = find(vim.HostSystem, host_name)
    host.configManager.advancedOption.UpdateOptions(
        changedValue=[vim.option.OptionValue(key="Net.PVRDMAVmknic", value=before)]
    )
    if ruleset_before:
        host.configManager.firewallSystem.EnableRuleset(id="pvrdma")
    created = provider.create(_inputs(host_name))
    assert _host_state(find, host_name) == ("vmk1", True)

    provider.delete(created.id, created.outs)

    assert _host_state(find, host_name) == (before, ruleset_before)


def test_delete_leaves_a_vmknic_someone_else_tagged_since(
    provider: PvrdmaHostSettingsProvider, host_name: str, find: Callable[[Any, str], Any]
) -> None:
    created = provider.create(_inputs(host_name))
    find(vim.HostSystem, host_name).configManager.advancedOption.UpdateOptions(
        changedValue=[vim.option.OptionValue(key="Net.PVRDMAVmknic", value="vmk3")]
    )

    provider.delete(created.id, created.outs)

    assert _host_state(find, host_name) == ("vmk3", False)


def test_missing_host_fails_with_its_name(provider: PvrdmaHostSettingsProvider) -> None:
    with pytest.raises(VsphereError, match=r"ESXi host 'esx-typo-17' not found in vCenter"):
        provider.create(_inputs("esx-typo-17"))


def test_read_of_a_host_that_is_gone_reports_the_resource_gone(
    provider: PvrdmaHostSettingsProvider,
) -> None:
    outs = {**_inputs("esx-removed"), "ruleset_enabled": True, "previous_vmknic": ""}
    result = provider.read("pvrdma:esx-removed", outs)
    assert result.id == ""
    provider.delete("pvrdma:esx-removed", outs)  # nothing to restore, no error


def test_short_vcenter_outage_is_ridden_out_by_retries(
    configured: Callable[..., Any],
    tcp_proxy: Any,
    host_name: str,
    find: Callable[[Any, str], Any],
) -> None:
    provider = configured(PvrdmaHostSettingsProvider(retry=FAST_RETRY), port=tcp_proxy.port)
    # vCenter drops every connection when the second change (the ruleset) is sent, and comes
    # back a moment later.
    tcp_proxy.cut_on(b"EnableRuleset", restore_after=0.3)

    created = provider.create(_inputs(host_name))

    assert tcp_proxy.cuts == 1
    assert _host_state(find, host_name) == ("vmk1", True)
    # The retry saw our own half-applied option, yet the true previous value is recorded.
    assert created.outs["previous_vmknic"] == ""
    assert created.outs["previous_ruleset_enabled"] is False


def test_vcenter_gone_mid_create_leaves_nothing_a_rerun_does_not_fix(
    configured: Callable[..., Any],
    tcp_proxy: Any,
    host_name: str,
    find: Callable[[Any, str], Any],
) -> None:
    provider = configured(PvrdmaHostSettingsProvider(retry=NO_RETRY), port=tcp_proxy.port)
    tcp_proxy.cut_on(b"EnableRuleset")

    with pytest.raises(VsphereError, match=f"PVRDMA settings on host {host_name}") as info:
        provider.create(_inputs(host_name))
    assert info.value.transient
    assert _host_state(find, host_name) == ("vmk1", False)  # half done: option yes, ruleset no

    # Pulumi recorded nothing (create failed); the next `pulumi up` creates again.
    tcp_proxy.restore()
    rerun = provider.create(_inputs(host_name))

    assert _host_state(find, host_name) == ("vmk1", True)
    read = provider.read(rerun.id, rerun.outs)
    assert provider.diff(rerun.id, read.outs, _inputs(host_name)).changes is False
    # Documented limit: the re-run cannot know the option was "" before the failed attempt, so it
    # records our own value and a later delete leaves the option rather than guess.
    assert rerun.outs["previous_vmknic"] == "vmk1"
    assert rerun.outs["previous_ruleset_enabled"] is False


def test_unreachable_vcenter_fails_with_a_clear_message(configured: Callable[..., Any], tcp_proxy: Any) -> None:
    provider = configured(
        PvrdmaHostSettingsProvider(retry=RetryPolicy(attempts=2, base_delay=0.05)), port=tcp_proxy.port
    )
    tcp_proxy.cut()  # refuses every connection

    with pytest.raises(VsphereError, match=r"read PVRDMA settings of host esx1: .*gave up after 2"):
        provider.read("pvrdma:esx1", _inputs("esx1"))
