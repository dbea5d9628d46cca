"""GuestinfoScrub against the vCenter simulator and a Kubernetes API double (issue 37 item 2).

A node VM is a clone carrying the first-boot extraConfig `first_boot.guestinfo_extra_config`
renders; the node's registration is played by the API double (tests/k8s_day2/kube_double.py).
What a vCenter reader sees is read straight from the VM's `config.extraConfig` over pyvmomi.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVmomi import vim

from components.k8s.rollout.steps import CONTROL_PLANE_LABEL
from components.vsphere.first_boot import guestinfo_extra_config
from components.vsphere.guestinfo_scrub import GuestinfoScrubProvider, NodeNotJoined
from components.vsphere.provider_base import RetryPolicy
from tests.k8s_day2.kube_double import KubeDouble, served
from tests.vsphere.conftest import TEMPLATE_VM
from tests.vsphere.vm_helpers import clone, destroy, power_on, reconfigure, unique

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
def kube() -> Iterator[tuple[KubeDouble, str]]:
    double = KubeDouble()
    with served(double) as kubeconfig:
        yield double, kubeconfig


@pytest.fixture
def provider(configured: Callable[..., Any]) -> GuestinfoScrubProvider:
    return configured(GuestinfoScrubProvider(poll_seconds=0.05, retry=FAST_RETRY))


def _props(
    vm: Any, kubeconfig: str, *, node: str = "master", control_plane: bool = True, timeout: float = 20
) -> dict[str, Any]:
    return {
        "vm_id": vm.config.uuid,
        "vm_name": vm.name,
        "node_name": node,
        "control_plane": control_plane,
        "kubeconfig": kubeconfig,
        "timeout_seconds": timeout,
    }


def _later(seconds: float, action: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


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


def test_keys_are_removed_once_the_control_plane_node_joined_and_the_metadata_stays(
    provider: GuestinfoScrubProvider, node_vm: Any, kube: tuple[KubeDouble, str]
) -> None:
    double, kubeconfig = kube
    seen_before_join: list[dict[str, str]] = []

    def register() -> None:
        seen_before_join.append(_extra_config(node_vm))
        double.add_node("master", ready=True)  # Ready, but kubeadm has not marked it yet

    def marked() -> None:
        seen_before_join.append(_extra_config(node_vm))
        double.nodes["master"]["metadata"]["labels"][CONTROL_PLANE_LABEL] = ""

    timers = [_later(0.3, register), _later(0.8, marked)]
    created = provider.create(_props(node_vm, kubeconfig))
    for timer in timers:
        timer.join()

    # Nothing was removed while the node had not finished its join.
    assert all("guestinfo.userdata" in extra for extra in seen_before_join)
    extra = _extra_config(node_vm)
    assert "guestinfo.userdata" not in extra and "guestinfo.userdata.encoding" not in extra
    assert USER_DATA.split("\n")[0] not in " ".join(extra.values())
    # cloud-init finds its datasource on later boots by the metadata, which carries no secret.
    assert {"guestinfo.metadata", "guestinfo.metadata.encoding"} <= set(extra)
    assert created.outs["keys_present"] == []
    assert created.id == f"guestinfo-scrub:{node_vm.config.uuid}"


def test_a_worker_has_joined_once_ready(
    provider: GuestinfoScrubProvider, node_vm: Any, kube: tuple[KubeDouble, str]
) -> None:
    double, kubeconfig = kube
    double.add_node("worker-1", ready=True)

    provider.create(_props(node_vm, kubeconfig, node="worker-1", control_plane=False))

    assert "guestinfo.userdata" not in _extra_config(node_vm)


def test_a_node_that_never_joins_keeps_its_keys_and_fails_naming_it(
    provider: GuestinfoScrubProvider, node_vm: Any, kube: tuple[KubeDouble, str]
) -> None:
    double, kubeconfig = kube
    double.add_node("worker-2", ready=False)

    with pytest.raises(
        NodeNotJoined, match=r"node worker-2 did not join within .* \(it is not Ready\); .*still in its VM"
    ):
        provider.create(_props(node_vm, kubeconfig, node="worker-2", control_plane=False, timeout=0.5))

    # Its first boot may still be to come: the keys stay until it joined.
    assert "guestinfo.userdata" in _extra_config(node_vm)


def test_keys_put_back_are_drift_and_the_next_up_removes_them(
    provider: GuestinfoScrubProvider, node_vm: Any, kube: tuple[KubeDouble, str]
) -> None:
    double, kubeconfig = kube
    double.add_node("worker-3", ready=True)
    props = _props(node_vm, kubeconfig, node="worker-3", control_plane=False)
    created = provider.create(props)
    assert provider.diff(created.id, provider.read(created.id, created.outs).outs, props).changes is False

    # Someone (or a tool) writes user-data back into the VM.
    reconfigure(node_vm, extraConfig=[vim.option.OptionValue(key="guestinfo.userdata", value="c2VjcmV0")])
    refreshed = provider.read(created.id, created.outs)
    assert refreshed.outs["keys_present"] == ["guestinfo.userdata"]
    diff = provider.diff(created.id, refreshed.outs, props)
    assert (diff.changes, diff.replaces) == (True, [])

    updated = provider.update(created.id, refreshed.outs, props)

    assert updated.outs["keys_present"] == []
    assert "guestinfo.userdata" not in _extra_config(node_vm)


def test_a_replaced_vm_is_a_new_scrub(
    provider: GuestinfoScrubProvider, node_vm: Any, kube: tuple[KubeDouble, str]
) -> None:
    _, kubeconfig = kube
    olds = {**_props(node_vm, kubeconfig), "keys_present": []}
    news = {**_props(node_vm, kubeconfig), "vm_id": "4211ffff-0000-0000-0000-000000000001"}
    assert provider.diff("guestinfo-scrub:x", olds, news).replaces == ["vm_id"]


def test_the_read_of_a_vm_that_is_gone_reports_the_scrub_gone(
    provider: GuestinfoScrubProvider, node_vm: Any, kube: tuple[KubeDouble, str]
) -> None:
    _, kubeconfig = kube
    props = {**_props(node_vm, kubeconfig), "keys_present": []}
    destroy(node_vm)

    assert provider.read("guestinfo-scrub:x", props).id == ""
    provider.delete("guestinfo-scrub:x", props)  # nothing to give back, no error


def test_check_refuses_what_cannot_name_a_vm_or_node(provider: GuestinfoScrubProvider) -> None:
    result = provider.check({}, {"vm_id": " ", "node_name": "", "timeout_seconds": 0, "__provider": "x"})
    assert sorted(f.property for f in result.failures) == ["node_name", "timeout_seconds", "vm_id"]
