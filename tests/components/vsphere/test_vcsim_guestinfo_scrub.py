"""GuestinfoScrub against the vCenter simulator (issue 37 item 2).

A node VM is a clone carrying the first-boot extraConfig `first_boot.guestinfo_extra_config`
renders, as pulumi-vsphere leaves it. What a vCenter reader sees is read straight from the VM's
`config.extraConfig` over pyvmomi. The wait for the node's join before it is NodeJoined's
(tests/components/k8s/join/test_node_joined.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVmomi import vim

from components.vsphere.first_boot import guestinfo_extra_config
from components.vsphere.guestinfo_scrub import GuestinfoScrubProvider, GuestWait
from components.vsphere.provider_base import RetryPolicy
from tests.components.vsphere.conftest import CLUSTER_HOSTS, TEMPLATE_VM, _find
from tests.components.vsphere.sim_deploy import _public, deployed, on_the_simulator, provider_of
from tests.components.vsphere.vm_helpers import clone, destroy, power_on, reconfigure, unique, vgpu_device_spec

pytestmark = pytest.mark.vcsim

FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.05, max_delay=0.2, max_total=20)
USER_DATA = "#cloud-config\nwrite_files:\n- path: /var/lib/gpucluster/pki/ca.key\n  content: PRIVATE KEY\n"
METADATA = '{"instance-id": "dev-gpu-master", "local-hostname": "master"}'


def _extra_config(vm: Any) -> dict[str, str]:
    """What a vCenter reader sees: every extraConfig entry of the VM (duplicates would show as such)."""
    entries = [(option.key, str(option.value)) for option in vm.config.extraConfig or []]
    assert len({key for key, _ in entries}) == len(entries), f"a key listed twice: {entries}"
    return dict(entries)


@pytest.fixture
def node_vm(find: Callable[[Any, str], Any], extended: Any) -> Iterator[Any]:
    """A powered-on node VM with its first-boot data in extraConfig, as pulumi-vsphere leaves it."""
    vm = clone(find(vim.VirtualMachine, TEMPLATE_VM), unique("scrub"))
    extra = guestinfo_extra_config(METADATA, USER_DATA)
    reconfigure(vm, extraConfig=[vim.option.OptionValue(key=k, value=v) for k, v in extra.items()])
    power_on(vm)
    yield vm
    with contextlib.suppress(Exception):
        destroy(vm)


@pytest.fixture
def provider(configured: Callable[..., Any]) -> GuestinfoScrubProvider:
    return configured(GuestinfoScrubProvider(retry=FAST_RETRY))


def _props(vm: Any) -> dict[str, Any]:
    return {"vm_id": vm.config.uuid, "vm_name": vm.name, "node_name": "master"}


# --- what the harness does, as vCenter does ----------------------------------------------------


def test_a_key_sent_empty_is_removed_and_a_key_sent_again_is_reset(node_vm: Any) -> None:
    """VirtualMachineConfigSpec.extraConfig: "If the key is already present, it will be reset with
    the new value provided. [...] Keys with empty values will be removed." (vcsim/extra_config.go)"""
    reconfigure(node_vm, extraConfig=[vim.option.OptionValue(key="guestinfo.metadata.encoding", value="gzip+base64")])
    reconfigure(node_vm, extraConfig=[vim.option.OptionValue(key="guestinfo.userdata", value="")])

    extra = _extra_config(node_vm)
    assert extra["guestinfo.metadata.encoding"] == "gzip+base64"
    assert "guestinfo.userdata" not in extra


# --- the scrub ------------------------------------------------------------------------------------


def test_the_user_data_keys_are_removed_and_the_metadata_stays(provider: GuestinfoScrubProvider, node_vm: Any) -> None:
    assert "guestinfo.userdata" in _extra_config(node_vm)

    created = provider.create(_props(node_vm))

    extra = _extra_config(node_vm)
    assert "guestinfo.userdata" not in extra and "guestinfo.userdata.encoding" not in extra
    # cloud-init finds its datasource on later boots by the metadata, which carries no secret.
    assert {"guestinfo.metadata", "guestinfo.metadata.encoding"} <= set(extra)
    assert created.outs == {
        "vm_id": node_vm.config.uuid,
        "vm_name": node_vm.name,
        "node_name": "master",
        "keys_present": [],
    }
    assert created.id == f"guestinfo-scrub:{node_vm.config.uuid}"
    again = provider.read(created.id, created.outs)
    assert provider.diff(created.id, again.outs, _props(node_vm)).changes is False


def test_a_redacted_value_still_counts_as_present_and_goes(provider: GuestinfoScrubProvider, node_vm: Any) -> None:
    # What vCenter shows once the guest's redact reached the .vmx (after a power cycle).
    reconfigure(node_vm, extraConfig=[vim.option.OptionValue(key="guestinfo.userdata", value="---")])

    provider.create(_props(node_vm))

    assert "guestinfo.userdata" not in _extra_config(node_vm)


def test_keys_put_back_are_drift_and_the_next_up_removes_them(provider: GuestinfoScrubProvider, node_vm: Any) -> None:
    created = provider.create(_props(node_vm))

    # Someone (or a tool) writes user-data back into the VM.
    reconfigure(node_vm, extraConfig=[vim.option.OptionValue(key="guestinfo.userdata", value="c2VjcmV0")])
    refreshed = provider.read(created.id, created.outs)
    assert refreshed.outs["keys_present"] == ["guestinfo.userdata"]
    diff = provider.diff(created.id, refreshed.outs, _props(node_vm))
    assert (diff.changes, diff.replaces) == (True, [])

    updated = provider.update(created.id, refreshed.outs, _props(node_vm))

    assert updated.outs["keys_present"] == []
    assert "guestinfo.userdata" not in _extra_config(node_vm)


def test_a_replaced_vm_is_a_new_scrub(provider: GuestinfoScrubProvider, node_vm: Any) -> None:
    olds = {**_props(node_vm), "keys_present": []}
    news = {**_props(node_vm), "vm_id": "4211ffff-0000-0000-0000-000000000001"}
    assert provider.diff("guestinfo-scrub:x", olds, news).replaces == ["vm_id"]


def test_the_read_of_a_vm_that_is_gone_reports_the_scrub_gone(provider: GuestinfoScrubProvider, node_vm: Any) -> None:
    props = {**_props(node_vm), "keys_present": []}
    destroy(node_vm)

    assert provider.read("guestinfo-scrub:x", props).id == ""
    provider.delete("guestinfo-scrub:x", props)  # nothing to give back, no error


def test_a_vm_that_is_gone_at_create_fails_naming_it(provider: GuestinfoScrubProvider) -> None:
    with pytest.raises(Exception, match=r"VM dev-gpu-worker-9 \(BIOS UUID 4211ffff-.*\) not found in vCenter"):
        provider.create(
            {"vm_id": "4211ffff-0000-0000-0000-000000000009", "vm_name": "dev-gpu-worker-9", "node_name": "w9"}
        )


def test_check_refuses_what_cannot_name_a_vm(provider: GuestinfoScrubProvider) -> None:
    result = provider.check({}, {"vm_id": " ", "vm_name": "x", "node_name": "x", "__provider": "x"})
    assert [f.property for f in result.failures] == ["vm_id"]


# --- the program's own VMs and scrubs ------------------------------------------------------------


def test_every_vm_of_a_deployed_dev_stack_is_left_with_no_secret_in_vcenter(si: Any, vcsim: Any, extended: Any) -> None:
    """dev's VMs as pulumi-vsphere makes them (tests/components/vsphere/sim_deploy.py: the program's real
    user-data in extraConfig), then each scrub the program registered, with its own provider."""
    base = _find(si, vim.VirtualMachine, TEMPLATE_VM)
    plain, gpu = clone(base, unique("rocky9-k8s")), clone(base, unique("rocky9-k8s-vgpu-t4-16c"))
    reconfigure(gpu, deviceChange=[vgpu_device_spec("grid_t4-16c")])
    try:
        edit = on_the_simulator("dev", template=plain.name, gpu_template=gpu.name, hosts=CLUSTER_HOSTS)
        with deployed(si, vcsim.config(), "dev", edit) as deployment:
            assert deployment.error is None, deployment.error
            vm_names = {r.urn: r.name for r in deployment.run.by_type("vsphere:index/virtualMachine:VirtualMachine")}
            scrubs = deployment.run.by_type("gpucluster:vsphere:GuestinfoScrub")
            assert len(scrubs) == len(deployment.vms) == 5
            for vm in deployment.vms.values():
                assert "guestinfo.userdata" in _extra_config(vm)  # what a vCenter reader saw until now
            for scrub in scrubs:
                [vm_urn] = scrub.property_dependencies["vm_id"]
                vm = deployment.vms[vm_names[vm_urn]]
                provider = provider_of(scrub, vcsim.config())
                checked = provider.check({}, {**_public(scrub.plain_inputs()), "vm_id": vm.config.uuid}).inputs
                # cloud-init on the guest read the user-data and set the node's hostname.
                _report_host_name(vm, checked["host_name"])
                provider.create(checked)
            for name, vm in deployment.vms.items():
                extra = _extra_config(vm)
                assert not any(key.startswith("guestinfo.userdata") for key in extra), name
                assert "guestinfo.metadata" in extra, name
    finally:
        for template in (plain, gpu):
            with contextlib.suppress(Exception):
                destroy(template)


# --- when: once the guest has read the user-data, or when the wait runs out (issue 40 item 6) ------


class FakeClock:
    """The scrub's clock: each sleep moves it on, and may change what the guest reports."""

    def __init__(self, on_sleep: Callable[[int], None] = lambda _n: None) -> None:
        self.now = 0.0
        self.sleeps = 0
        self._on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        self._on_sleep(self.sleeps)


def _report_host_name(vm: Any, host_name: str) -> None:
    """What VMware Tools does once cloud-init set the hostname (vcsim: a `SET.` extraConfig key
    sets the property and is not kept in extraConfig, simulator/virtual_machine.go)."""
    reconfigure(vm, extraConfig=[vim.option.OptionValue(key="SET.guest.hostName", value=host_name)])


def _waiting(configured: Callable[..., Any], clock: FakeClock) -> GuestinfoScrubProvider:
    wait = GuestWait(poll_seconds=10.0, clock=clock.clock, sleep=clock.sleep)
    return configured(GuestinfoScrubProvider(retry=FAST_RETRY, wait=wait))


def _waiting_props(vm: Any) -> dict[str, Any]:
    return {**_props(vm), "host_name": "master", "wait_seconds": 600}


def test_the_scrub_waits_for_the_guest_to_report_the_nodes_hostname(
    configured: Callable[..., Any], node_vm: Any
) -> None:
    _report_host_name(node_vm, "localhost.localdomain")  # the template's own name, before cloud-init
    clock = FakeClock(on_sleep=lambda n: n == 3 and _report_host_name(node_vm, "master.lab.example"))

    _waiting(configured, clock).create(_waiting_props(node_vm))

    assert clock.sleeps == 3  # removed on the first look after the guest reported it, not before
    assert "guestinfo.userdata" not in _extra_config(node_vm)


def test_a_guest_that_read_its_user_data_is_scrubbed_without_waiting_for_its_join(
    configured: Callable[..., Any], node_vm: Any
) -> None:
    """The node may never join (the bootstrap refused the RDMA device): the keys still go."""
    _report_host_name(node_vm, "master")
    clock = FakeClock()

    _waiting(configured, clock).create(_waiting_props(node_vm))

    assert clock.sleeps == 0
    assert "guestinfo.userdata" not in _extra_config(node_vm)


def test_a_guest_that_never_reads_its_user_data_is_scrubbed_when_the_wait_runs_out(
    configured: Callable[..., Any], node_vm: Any
) -> None:
    clock = FakeClock()

    created = _waiting(configured, clock).create(_waiting_props(node_vm))

    assert clock.now >= 600 and clock.sleeps == 60
    assert created.outs["keys_present"] == []
    assert "guestinfo.userdata" not in _extra_config(node_vm)


def test_check_refuses_a_negative_wait(provider: GuestinfoScrubProvider) -> None:
    result = provider.check({}, {"vm_id": "4211", "vm_name": "x", "node_name": "x", "wait_seconds": -1})
    assert [f.property for f in result.failures] == ["wait_seconds"]
