"""Pure tests of the vSphere layer's planning and plumbing: no simulator needed."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from pulumi.runtime import rpc
from pyVmomi import vim

from components.resource_handlers import ConfigureRequest
from components.vcenter.errors import VsphereError
from components.vcenter.faults import fault_text
from components.vcenter.settings import VcenterConnection, parse_server
from components.vcenter.tasks import backoff_delays, with_retries
from components.vsphere.host_graphics.resource import HostGraphicsMode, HostGraphicsModeProvider
from components.vsphere.provider_base import RetryPolicy
from components.vsphere.pvrdma_host import PvrdmaHostSettings, PvrdmaHostSettingsProvider, vmknic_device_from_vnic_id
from components.vsphere.vgpu.attachment import (
    VgpuAttachment,
    VgpuAttachmentProvider,
    VgpuDevice,
    VgpuPlan,
    plan_vgpu_devices,
)

PASSWORD = "pw-Zq8!never-in-state"


# --- vGPU device diff ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("desired", "existing", "expected"),
    [
        pytest.param(["grid_t4-16c"], [], VgpuPlan(add=("grid_t4-16c",), remove=()), id="attach"),
        pytest.param(["grid_t4-16c"], [VgpuDevice(13000, "grid_t4-16c")], VgpuPlan((), ()), id="converged"),
        pytest.param(
            ["grid_t4-8c"],
            [VgpuDevice(13000, "grid_t4-16c")],
            VgpuPlan(add=("grid_t4-8c",), remove=(13000,)),
            id="profile-change",
        ),
        pytest.param(
            [],
            [VgpuDevice(1, "grid_t4-4c"), VgpuDevice(2, "grid_t4-4c")],
            VgpuPlan(add=(), remove=(1, 2)),
            id="detach-all",
        ),
        pytest.param(
            ["grid_t4-4c", "grid_t4-4c"],
            [VgpuDevice(7, "grid_t4-4c")],
            VgpuPlan(add=("grid_t4-4c",), remove=()),
            id="multiset-add-one",
        ),
        pytest.param(
            ["grid_t4-4c"],
            [VgpuDevice(7, "grid_t4-4c"), VgpuDevice(8, "grid_t4-4c")],
            VgpuPlan(add=(), remove=(8,)),
            id="multiset-remove-extra-keeps-first",
        ),
        pytest.param(
            ["b", "a"],
            [VgpuDevice(1, "a"), VgpuDevice(2, "b")],
            VgpuPlan((), ()),
            id="order-does-not-matter",
        ),
    ],
)
def test_plan_vgpu_devices(desired: list[str], existing: list[VgpuDevice], expected: VgpuPlan) -> None:
    assert plan_vgpu_devices(desired, existing) == expected


def test_plan_is_empty_only_when_converged() -> None:
    assert plan_vgpu_devices(["a"], [VgpuDevice(1, "a")]).empty
    assert not plan_vgpu_devices(["a"], []).empty


# --- connection settings -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("vc.example.com", ("vc.example.com", 443, "https")),
        ("vc.example.com:8443", ("vc.example.com", 8443, "https")),
        ("[fd00::1]:443", ("fd00::1", 443, "https")),
        ("http://127.0.0.1:8989/sdk", ("127.0.0.1", 8989, "http")),
        ("https://vc", ("vc", 443, "https")),
    ],
)
def test_parse_server(server: str, expected: tuple[str, int, str]) -> None:
    assert parse_server(server) == expected


@pytest.mark.parametrize("server", ["", "ftp://vc", "vc:notaport"])
def test_parse_server_rejects(server: str) -> None:
    with pytest.raises(VsphereError, match="vsphereServer"):
        parse_server(server)


def _config(raw: dict[str, Any]) -> dict[str, Any]:
    return raw


def test_from_pulumi_config_reads_vsphere_namespace() -> None:
    conn = VcenterConnection.from_pulumi_config(
        _config(
            {
                "vsphere:vsphereServer": "vc.lab:8443",
                "vsphere:user": "administrator@vsphere.local",
                "vsphere:password": PASSWORD,
                "vsphere:allowUnverifiedSsl": "true",
            }
        ),
        env={},
    )
    assert (conn.server, conn.port, conn.protocol) == ("vc.lab", 8443, "https")
    assert conn.user == "administrator@vsphere.local"
    assert conn.verify_ssl is False
    assert PASSWORD not in repr(conn)


def test_from_pulumi_config_falls_back_to_env() -> None:
    conn = VcenterConnection.from_pulumi_config(
        _config({"vsphere:vsphereServer": "vc.lab"}),
        env={"VSPHERE_USER": "u", "VSPHERE_PASSWORD": PASSWORD},
    )
    assert (conn.user, conn.password, conn.verify_ssl) == ("u", PASSWORD, True)


def test_from_pulumi_config_names_every_missing_key() -> None:
    with pytest.raises(VsphereError) as info:
        VcenterConnection.from_pulumi_config(_config({"vsphere:user": "u"}), env={})
    message = str(info.value)
    assert "vsphere:vsphereServer (or env VSPHERE_SERVER)" in message
    assert "vsphere:password (or env VSPHERE_PASSWORD)" in message
    assert "vsphere:user" not in message.split("missing:")[1].split(".")[0]


def test_bad_boolean_names_the_key() -> None:
    with pytest.raises(VsphereError, match=r"vsphere:allowUnverifiedSsl.*'maybe'"):
        VcenterConnection.from_pulumi_config(
            _config(
                {
                    "vsphere:vsphereServer": "vc",
                    "vsphere:user": "u",
                    "vsphere:password": "p",
                    "vsphere:allowUnverifiedSsl": "maybe",
                }
            ),
            env={},
        )


def test_provider_without_settings_fails_on_first_vcenter_call_with_the_keys() -> None:
    provider = PvrdmaHostSettingsProvider()
    provider.configure(ConfigureRequest({}))
    with pytest.raises(VsphereError, match=r"vsphere:vsphereServer"):
        provider.read("pvrdma:h", {"host_name": "h", "vmknic_device": "vmk1"})


def test_vmknic_device_from_vnic_id() -> None:
    assert vmknic_device_from_vnic_id("host-1234_vmk1") == "vmk1"
    assert vmknic_device_from_vnic_id("host_with_underscores-9_vmk12") == "vmk12"
    with pytest.raises(ValueError, match="Vnic id"):
        vmknic_device_from_vnic_id("vmk1")


# --- retries -------------------------------------------------------------------------------


def test_with_retries_retries_transient_faults_then_succeeds() -> None:
    calls: list[int] = []
    sleeps: list[float] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise vim.fault.TaskInProgress(msg="busy")
        return "ok"

    assert with_retries(flaky, what="op", sleep=sleeps.append) == "ok"
    assert len(calls) == 3
    assert len(sleeps) == 2
    assert sleeps[1] > sleeps[0] * 0.5  # backoff grows (with jitter)


def test_with_retries_fails_lasting_faults_at_once_with_fault_text() -> None:
    calls: list[int] = []

    def denied() -> None:
        calls.append(1)
        raise vim.fault.NoPermission(msg="Permission to perform this operation was denied.")

    with pytest.raises(VsphereError, match=r"op on h1: NoPermission: Permission to perform"):
        with_retries(denied, what="op on h1", sleep=lambda _: None)
    assert len(calls) == 1


def test_with_retries_gives_up_after_the_attempts() -> None:
    def down() -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(VsphereError, match=r"gave up after 3 attempts") as info:
        with_retries(down, what="op", attempts=3, sleep=lambda _: None)
    assert info.value.transient


def test_with_retries_respects_total_budget() -> None:
    calls: list[int] = []

    def down() -> None:
        calls.append(1)
        raise ConnectionResetError()

    with pytest.raises(VsphereError):
        with_retries(down, what="op", attempts=50, base_delay=10, max_total=15, sleep=lambda _: None)
    assert len(calls) < 5


def test_backoff_is_capped_and_jittered() -> None:
    delays = backoff_delays(base=1, cap=4, attempts=6, rng=lambda: 1.0)
    assert delays == [1, 2, 4, 4, 4, 4]
    low = backoff_delays(base=1, cap=4, attempts=3, rng=lambda: 0.0)
    assert low == [0.5, 1, 2]


def test_fault_text_prefers_message_then_type() -> None:
    assert fault_text(vim.fault.NotFound()) == "NotFound"
    assert fault_text(vim.fault.NotFound(msg="no such ruleset")) == ("NotFound: no such ruleset")


def test_retry_policy_defaults_are_bounded() -> None:
    policy = RetryPolicy()
    assert policy.max_total <= 300
    assert policy.attempts >= 2


# --- check and diff tables -----------------------------------------------------------------


def test_pvrdma_check_normalizes_and_rejects() -> None:
    provider = PvrdmaHostSettingsProvider()
    net = "192.168.50.0/24"
    ok = provider.check({}, {"host_name": " esx1 ", "vmknic_device": "vmk1", "allowed_network": net, "__provider": "x"})
    assert ok.failures == []
    assert ok.inputs == {"host_name": "esx1", "vmknic_device": "vmk1", "allowed_network": net}
    bad = provider.check({}, {"host_name": "", "vmknic_device": "eth0", "allowed_network": "192.168.50.1/24"})
    assert {f.property for f in bad.failures} == {"host_name", "vmknic_device", "allowed_network"}
    unknown = provider.check({}, {"host_name": "esx1", "vmknic_device": rpc.UNKNOWN, "allowed_network": net})
    assert unknown.failures == []


_PVRDMA_NET = "192.168.50.0/24"
_PVRDMA_OLD = {
    "host_name": "esx1",
    "vmknic_device": "vmk1",
    "ruleset_enabled": True,
    "previous_vmknic": "",
    "previous_ruleset_enabled": False,
    "allowed_network": _PVRDMA_NET,
    "allowed_all_ip": False,
    "allowed_hosts": [_PVRDMA_NET],
    "previous_allowed_all_ip": True,
    "previous_allowed_hosts": [],
}
_PVRDMA_NEW = {"host_name": "esx1", "vmknic_device": "vmk1", "allowed_network": _PVRDMA_NET}


@pytest.mark.parametrize(
    ("olds", "news", "changes", "replaces"),
    [
        (_PVRDMA_OLD, _PVRDMA_NEW, False, []),
        (_PVRDMA_OLD, {**_PVRDMA_NEW, "vmknic_device": "vmk2"}, True, []),
        ({**_PVRDMA_OLD, "vmknic_device": "vmk9"}, _PVRDMA_NEW, True, []),
        ({**_PVRDMA_OLD, "ruleset_enabled": False}, _PVRDMA_NEW, True, []),
        ({**_PVRDMA_OLD, "allowed_all_ip": True}, _PVRDMA_NEW, True, []),
        ({**_PVRDMA_OLD, "allowed_hosts": [_PVRDMA_NET, "10.0.0.0/8"]}, _PVRDMA_NEW, True, []),
        (_PVRDMA_OLD, {**_PVRDMA_NEW, "allowed_network": "192.168.60.0/24"}, True, []),
        ({k: v for k, v in _PVRDMA_OLD.items() if "allowed" not in k}, _PVRDMA_NEW, True, []),
        (_PVRDMA_OLD, {**_PVRDMA_NEW, "host_name": "esx2"}, True, ["host_name"]),
    ],
    ids=["same", "new-vmknic", "drift-retagged", "drift-ruleset-off", "drift-open-to-all", "drift-extra-network",
         "new-subnet", "state-before-restriction", "other-host"],
)  # fmt: skip
def test_pvrdma_diff(olds: dict[str, Any], news: dict[str, Any], changes: bool, replaces: list[str]) -> None:
    result = PvrdmaHostSettingsProvider().diff("pvrdma:esx1", olds, news)
    assert (result.changes, result.replaces) == (changes, replaces)


_VGPU_OLD = {
    "vm_id": "4211aaaa-0000-0000-0000-000000000001",
    "vm_name": "w1",
    "profiles": ["grid_t4-16c"],
    "memory_reservation_locked_to_max": True,
}


@pytest.mark.parametrize(
    ("olds", "news", "changes", "replaces"),
    [
        (_VGPU_OLD, {**_VGPU_OLD}, False, []),
        (_VGPU_OLD, {**_VGPU_OLD, "profiles": ["grid_t4-8c"]}, True, []),
        ({**_VGPU_OLD, "profiles": []}, {**_VGPU_OLD}, True, []),
        ({**_VGPU_OLD, "memory_reservation_locked_to_max": False}, {**_VGPU_OLD}, True, []),
        (_VGPU_OLD, {**_VGPU_OLD, "vm_id": "4211bbbb-0000-0000-0000-000000000002"}, True, ["vm_id"]),
    ],
    ids=["same", "profile-change", "drift-detached", "drift-memory", "other-vm"],
)  # fmt: skip
def test_vgpu_diff(olds: dict[str, Any], news: dict[str, Any], changes: bool, replaces: list[str]) -> None:
    result = VgpuAttachmentProvider().diff("vgpu:x", olds, news)
    assert (result.changes, result.replaces) == (changes, replaces)
    assert result.delete_before_replace is True


def test_vgpu_check_rejects_empty_profiles() -> None:
    result = VgpuAttachmentProvider().check({}, {"vm_id": "x", "vm_name": "w", "profiles": []})
    assert [f.property for f in result.failures] == ["profiles"]


def test_graphics_check_without_vcenter_settings_does_not_fail() -> None:
    # Preview of a new stack without credentials: the early check is skipped, not failed.
    provider = HostGraphicsModeProvider()
    provider.configure(ConfigureRequest({}))
    result = provider.check({}, {"host_name": "esx1", "manage": False})
    assert result.failures == []


# --- the resources as the engine sees them (SDK mocks) -------------------------------------


class _RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.registered: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.registered.append(args)
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


@pulumi.runtime.test
def test_resources_register_typed_tokens_and_no_credentials() -> Any:
    mocks = _RecordingMocks()
    pulumi.runtime.set_mocks(mocks, preview=False)
    pvrdma = PvrdmaHostSettings(
        "esx1-pvrdma", host_name="esx1", vmknic_device="vmk1", allowed_network="192.168.50.0/24"
    )
    graphics = HostGraphicsMode("esx1-graphics", host_name="esx1", manage=True)
    vgpu = VgpuAttachment("w1-vgpu", vm_id="4211aaaa-0000", vm_name="w1", profiles=["grid_t4-16c"])

    def verify(_: Any) -> None:
        ours = [args for args in mocks.registered if not args.typ.startswith("pulumi:providers:")]
        types = {args.name: args.typ for args in ours}
        # One provider resource serves them all: the vCenter connection is its input, not theirs.
        assert [args.typ for args in mocks.registered if args not in ours] == ["pulumi:providers:gpucluster"]
        assert {args.provider.split("::")[-2] for args in ours} == {"gpucluster"}
        assert types == {
            "esx1-pvrdma": "gpucluster:vsphere:PvrdmaHostSettings",
            "esx1-graphics": "gpucluster:vsphere:HostGraphicsMode",
            "w1-vgpu": "gpucluster:vsphere:VgpuAttachment",
        }
        for args in ours:
            assert not {k for k in args.inputs if "password" in k.lower() or "user" in k.lower()}

    # Once all three are registered.
    return pulumi.Output.all(pvrdma.vmknic_device, graphics.manage, vgpu.profiles).apply(verify)


def test_vgpu_attachment_requires_a_profile() -> None:
    with pytest.raises(ValueError, match="w1-vgpu: profiles must name at least one"):
        VgpuAttachment("w1-vgpu", vm_id="x", vm_name="w1", profiles=[])
