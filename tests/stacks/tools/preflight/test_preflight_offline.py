"""Preflight without vCenter: exit statuses for bad input, and the checks the simulator cannot
stage (guest IPs, uplinks in use, host graphics), judged on a hand-built inventory snapshot."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from components.vcenter.inventory_model import (
    DatastoreInfo,
    GpuInfo,
    HostInfo,
    Inventory,
    RdmaDeviceInfo,
    RulesetInfo,
    VmInfo,
)
from stacks.cli import main
from stacks.environment.loader import load_environment, read_stack_file
from stacks.tools.preflight import command as preflight_command
from stacks.tools.preflight.checks import check
from stacks.tools.preflight.checks.gpus import _free_slots
from tests.stack_fixtures import copy_fixture_stacks, fixture_stack

ROOT = Path(__file__).resolve().parents[4]
ENV = "vsphere-gpu-cluster:environment"


def test_invalid_stack_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump({"config": {ENV: {"name": "Bad Name"}}}))
    assert main(["preflight", "bad", "--file", str(path), "--server", "http://127.0.0.1:9"]) == 2
    captured = capsys.readouterr()
    assert f"{ENV}.name: " in captured.err
    assert "Traceback" not in captured.out + captured.err


def test_missing_credentials_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for name in ("VSPHERE_SERVER", "VSPHERE_USER", "VSPHERE_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no Pulumi CLI
    # The project's own stack file (the Pulumi CLI is asked only for that one): the fixture's project.
    monkeypatch.setattr(preflight_command, "PROJECT_DIR", copy_fixture_stacks(tmp_path / "project", ("dev",)))
    assert main(["preflight", "dev", "--file", str(tmp_path / "project" / "Pulumi.dev.yaml")]) == 2
    err = capsys.readouterr().err
    assert (
        "vsphere:password not found; tried, in order: --password: not given; `pulumi config --json --show-secrets "
        "--stack dev`: not run, the Pulumi CLI is not on PATH; Pulumi.dev.yaml: not set; environment "
        "VSPHERE_PASSWORD: not set"
    ) in err
    # No stack file names the account: it comes by role from VSPHERE_USER (docs/environments.md).
    assert "vsphere:user not found; tried, in order: --user: not given;" in err
    assert "Traceback" not in err


def _host(name: str, **overrides: object) -> HostInfo:
    values: dict[str, object] = {
        "name": name,
        "moid": f"host-{name}",
        "cluster": "GPU-Cluster",
        "connected": True,
        "connection_state": "connected",
        "maintenance": False,
        "version": "8.0.3",
        "memory_mb": 262144,
        "pnics": ("vmnic0", "vmnic4"),
        "uplink_of": {"vmnic0": "standard switch vSwitch0"},
        "vgpu_profiles": ("grid_t4-16c",),
        "graphics_default": "sharedDirect",
        "vmknic_ips": {},
        "rdma_devices": (RdmaDeviceInfo("vmrdma0", "vmnic4", roce=True),),
        "gpus": (GpuInfo("NVIDIA Tesla T4", "NVIDIA Corporation", "0000:3b:00.0", 16384, "sharedDirect"),),
        # A host whose administrators restricted the management ruleset (docs/security.md).
        "firewall": (RulesetInfo("vSphereClient", enabled=True, all_ip=False, allowed=("10.0.0.5",)),),
    }
    values.update(overrides)
    return HostInfo(**values)  # type: ignore[arg-type]


def _template() -> VmInfo:
    return VmInfo("rocky9-k8s-gpu-template", "vm-1", None, False, 0, True, (), ("base",), (50.0,))


TOOLKIT_RECORDED = {"gpucluster.nvidiaContainerToolkitVersion": "1.18.0"}
"""What the Packer build of the GPU template records (templates/packer/gpu)."""


def _gpu_template() -> VmInfo:
    return VmInfo(
        "rocky9-k8s-vgpu-t4-16c",
        "vm-2",
        None,
        False,
        0,
        True,
        (),
        ("base",),
        (50.0,),
        "bios",
        "vmx-19",
        ("grid_t4-16c",),
        extra_config=dict(TOOLKIT_RECORDED),
    )


def _inventory(**host_overrides: object) -> Inventory:
    env = load_environment(read_stack_file(fixture_stack("dev")))
    hosts = {h.name: _host(h.name, **host_overrides) for h in env.hosts}
    return Inventory(
        datacenter="Datacenter",
        clusters={"GPU-Cluster"},
        hosts=hosts,
        vms={"rocky9-k8s-gpu-template": [_template()], "rocky9-k8s-vgpu-t4-16c": [_gpu_template()]},
        datastores={"datastore1": DatastoreInfo("datastore1", 2**40, True)},
        networks={"VM Network"},
        folders={"gpu-cluster"},
    )


@pytest.fixture
def dev_env():
    return load_environment(read_stack_file(fixture_stack("dev")))


def test_dev_stack_against_a_matching_snapshot_is_clean(dev_env) -> None:
    findings = check(dev_env, _inventory())
    assert [f.render() for f in findings if f.level != "OK"] == []


def test_address_in_use_by_another_vm_is_a_blocker(dev_env) -> None:
    inv = _inventory()
    inv.vms["someone-else"] = [VmInfo("someone-else", "vm-9", None, True, 0, False, ("10.10.0.52",), (), ())]
    blockers = [f.render() for f in check(dev_env, inv) if f.level == "BLOCKER"]
    assert blockers == [
        f"BLOCKER {ENV}.gpuWorkers.nodes[1].managementIp: 10.10.0.52 is in use by VM 'someone-else' "
        "(reported by its guest tools)"
    ]


def test_vmnic_used_by_another_switch_is_a_blocker(dev_env) -> None:
    inv = _inventory(uplink_of={"vmnic4": "standard switch vSwitch1"})
    blockers = [f.render() for f in check(dev_env, inv) if f.level == "BLOCKER"]
    # One line for the four hosts (checks.report.grouped).
    assert blockers == [
        f"BLOCKER {ENV}.hosts[0,1,2,3].rdmaVmnics[0]: vmnic4 on each of 'esxi-01.lab.example.com', 'esxi-02.lab.example.com', 'esxi-03.lab.example.com', 'esxi-04.lab.example.com' is already an uplink of "
        "standard switch vSwitch1; free it for the RDMA switch"
    ]
    ours = _inventory(uplink_of={"vmnic4": "distributed switch dev-rdma-dvs"})  # a re-run: our own switch
    assert [f for f in check(dev_env, ours) if f.level == "BLOCKER"] == []


def _gpu(graphics_type: str, *vm_moids: str) -> tuple[GpuInfo, ...]:
    return (GpuInfo("NVIDIA Tesla T4", "NVIDIA Corporation", "0000:3b:00.0", 16384, graphics_type, vm_moids),)


def test_unmanaged_host_graphics_must_be_actively_shared_direct(dev_env) -> None:
    env = dev_env.model_copy(update={"host_graphics": dev_env.host_graphics.model_copy(update={"manage": False})})
    assert [f for f in check(env, _inventory()) if f.level == "BLOCKER"] == []
    # Configured as Shared Direct, but xorg never restarted: the device still runs 'shared'.
    blockers = [f.render() for f in check(env, _inventory(gpus=_gpu("shared"))) if f.level == "BLOCKER"]
    assert len(blockers) == 1  # the four hosts in one line (checks.report.grouped)
    assert blockers[0].startswith(
        f"BLOCKER {ENV}.hostGraphics.manage: each of hosts 'esxi-01.lab.example.com', 'esxi-02.lab.example.com', 'esxi-03.lab.example.com', 'esxi-04.lab.example.com': the NVIDIA GPU runs in 'shared' mode "
        "now, not 'sharedDirect' (vGPU needs it); 'sharedDirect' is configured but takes effect only when xorg "
        "restarts"
    )


def test_managed_host_graphics_switch_needs_the_gpu_free(dev_env) -> None:
    assert dev_env.host_graphics.manage
    found = check(dev_env, _inventory(graphics_default="shared", gpus=_gpu("shared")))
    warns = [f.render() for f in found if f.level == "WARN"]
    assert len(warns) == 1 and "The program will set Shared Direct and restart the host's xorg service" in warns[0]
    assert [f for f in found if f.level == "BLOCKER"] == []

    inv = _inventory(graphics_default="shared", gpus=_gpu("shared", "vm-9"))
    inv.vms["vsga-desktop"] = [VmInfo("vsga-desktop", "vm-9", "host-x", True, 0, False, (), (), ())]
    blockers = [f.render() for f in check(dev_env, inv) if f.level == "BLOCKER"]
    assert len(blockers) == 1
    assert blockers[0].startswith(
        f"BLOCKER {ENV}.hosts[0,1,2,3].name: each of hosts 'esxi-01.lab.example.com', 'esxi-02.lab.example.com', 'esxi-03.lab.example.com', 'esxi-04.lab.example.com': the NVIDIA GPU runs"
    )
    assert blockers[0].endswith("and these VMs hold it: vsga-desktop. Power them off (or move them) first")


def test_host_without_an_nvidia_device_is_a_blocker(dev_env) -> None:
    blockers = [f.render() for f in check(dev_env, _inventory(gpus=())) if f.level == "BLOCKER"]
    assert blockers[0] == (
        f"BLOCKER {ENV}.hosts[0,1,2,3].name: each of hosts 'esxi-01.lab.example.com', 'esxi-02.lab.example.com', 'esxi-03.lab.example.com', 'esxi-04.lab.example.com' has no NVIDIA graphics device (graphicsInfo "
        "lists none): vGPU needs the GPU and the NVIDIA vGPU Manager VIB on every GPU host"
    )


def test_disconnected_host_and_maintenance(dev_env) -> None:
    inv = _inventory()
    name = dev_env.hosts[2].name
    inv.hosts[name] = _host(name, connected=False, connection_state="notResponding", maintenance=True)
    rendered = [f.render() for f in check(dev_env, inv) if f.level != "OK"]
    assert rendered == [
        f"BLOCKER {ENV}.hosts[2].name: host '{name}' is notResponding, not connected",
        f"WARN    {ENV}.hosts[2].name: host '{name}' is in maintenance mode; VMs cannot power on there",
    ]


def test_tight_memory_is_a_warning(dev_env) -> None:
    inv = _inventory(memory_mb=26000)  # 24576 MB reserved of 26000: fits, with little room
    warnings = [f.render() for f in check(dev_env, inv) if f.level == "WARN"]
    assert len(warnings) == 4
    assert warnings[0].startswith(f"WARN    {ENV}.gpuWorkers.nodes[0].host: tight memory on 'esxi-01.lab.example.com'")


def test_linked_clone_disk_size_note(dev_env) -> None:
    inv = _inventory()
    # The workers are linked clones of the GPU template: its disk is what they keep.
    inv.vms["rocky9-k8s-gpu-template"] = [
        VmInfo("rocky9-k8s-gpu-template", "vm-1", None, False, 0, True, (), ("base",), (30.0,))
    ]
    assert [f for f in check(dev_env, inv) if f.level == "WARN"] == []
    inv.vms["rocky9-k8s-vgpu-t4-16c"] = [replace(_gpu_template(), disk_gb=(30.0,))]
    warnings = [f.render() for f in check(dev_env, inv) if f.level == "WARN"]
    assert warnings == [
        f"WARN    {ENV}.gpuWorkers.diskGb: linked clones keep the template's 30 GB disk; diskGb 50 is ignored"
    ]


# --- issue 14 defect 8, judged on hand-built snapshots -------------------------------------


def test_rdma_pairing_unknown_before_api_7_is_a_warning(dev_env) -> None:
    inv = _inventory(rdma_devices=())
    inv.rdma_reported = False
    rendered = [f.render() for f in check(dev_env, inv) if f.level != "OK"]
    assert rendered == [
        f"WARN    {ENV}.hosts: vCenter's API is older than 7.0 and does not report RDMA devices: whether each "
        "RDMA vmnic is paired with a RoCE device (else PVRDMA falls back to TCP) was not checked"
    ]


@pytest.mark.parametrize(
    ("hardware_version", "esxi", "level"),
    [
        (19, "7.0.2", "OK"),
        (19, "7.0.1", "BLOCKER"),
        (20, "7.0.3", "BLOCKER"),
        (20, "8.0.0", "OK"),
        (21, "8.0.1", "BLOCKER"),
        (21, "8.0.2", "OK"),
        (16, "8.0.3", "BLOCKER"),
    ],
)
def test_hardware_version_against_esxi_kb_2007240(dev_env, hardware_version: int, esxi: str, level: str) -> None:
    env = dev_env.model_copy(update={"vm": dev_env.vm.model_copy(update={"hardware_version": hardware_version})})
    # (The GPU template's own version, vmx-19, is judged by gpu_template: left out here.)
    ours = [
        f
        for f in check(env, _inventory(version=esxi))
        if f.key == f"{ENV}.vm.hardwareVersion" and not f.message.startswith("template ")
    ]
    assert [f.level for f in ours] == [level], ours


def test_older_cluster_host_outside_the_gpu_hosts_is_a_warning(dev_env) -> None:
    inv = _inventory()
    inv.hosts["spare"] = _host("spare", version="6.7.0")
    ours = [f.render() for f in check(dev_env, inv) if f.key == f"{ENV}.vm.hardwareVersion"]
    assert ours == [
        f"WARN    {ENV}.vm.hardwareVersion: hardware version 19 needs ESXi 7.0 U2 or later; cluster hosts 'spare' "
        "(ESXi 6.7.0) are older, so the control plane cannot run (or move) there"
    ]


MMIO_128 = {"pciPassthru.use64bitMMIO": "TRUE", "pciPassthru.64bitMMIOSizeGB": "128"}


@pytest.mark.parametrize(
    ("profiles", "firmware", "extra", "level"),
    [
        (["grid_t4-16c"], "bios", {}, "OK"),
        (["grid_a100-40c"], "bios", MMIO_128, "BLOCKER"),
        (["grid_a100-3-20c"], "bios", MMIO_128, "BLOCKER"),
        (["grid_t4-8c", "grid_l40-24q"], "bios", {}, "BLOCKER"),
        (["grid_a100-40c"], "efi", {}, "BLOCKER"),  # EFI without 64-bit MMIO: vCenter refuses the power-on
        (["grid_a100-40c"], "efi", MMIO_128, "OK"),
    ],
)
def test_gpu_template_firmware_and_mmio_rule(
    dev_env, profiles: list[str], firmware: str, extra: dict[str, str], level: str
) -> None:
    """One rule (components.vsphere.vgpu.profiles) judged on the template the workers clone."""
    workers = dev_env.gpu_workers.model_copy(update={"vgpu_profiles": profiles})
    env = dev_env.model_copy(update={"gpu_workers": workers})
    inv = _inventory(vgpu_profiles=tuple(profiles))
    template = replace(
        _gpu_template(), vgpu_profiles=tuple(profiles), firmware=firmware, extra_config={**TOOLKIT_RECORDED, **extra}
    )
    inv.vms[template.name] = [template]
    ours = [f for f in check(env, inv) if f.key == f"{ENV}.vcenter.gpuTemplate" and f.message.startswith("template ")]
    ours = [f for f in ours if "Container Toolkit" not in f.message]  # judged by test_gpu_template
    assert [f.level for f in ours] == [level], ours


@pytest.mark.parametrize(
    ("gpus", "others", "profile", "free"),
    [
        ([16], [], "grid_t4-16c", 1),
        ([16], ["grid_t4-8c"], "grid_t4-16c", 0),  # one profile per GPU: the other VM's 8c holds it
        ([16], ["grid_t4-8c"], "grid_t4-8c", 1),  # same profile: the second half is free
        ([16, 16], ["grid_t4-4c"] * 5, "grid_t4-4c", 3),
        ([16, 16], ["grid_t4-4c"] * 5, "grid_t4-16c", 0),
        ([16, 16, 16], ["grid_t4-4c"], "grid_t4-8c", 4),
    ],
)
def test_free_vgpu_slots(gpus: list[int], others: list[str], profile: str, free: int) -> None:
    assert _free_slots(gpus, others, profile) == free


def test_powered_off_gpu_user_does_not_block(dev_env) -> None:
    inv = _inventory()
    host = inv.hosts[dev_env.hosts[0].name]
    inv.vms["desktop"] = [
        VmInfo("desktop", "vm-7", host.moid, False, 0, False, (), (), (), vgpu_profiles=("grid_t4-16c",))
    ]
    rendered = [f.render() for f in check(dev_env, inv) if f.level != "OK"]
    assert rendered == [
        f"WARN    {ENV}.hosts[0].name: other VMs on '{host.name}' use vGPUs: desktop (grid_t4-16c, powered off); "
        "enough left for this stack's workers"
    ]
    inv.vms["desktop"] = [
        VmInfo("desktop", "vm-7", host.moid, True, 0, False, (), (), (), vgpu_profiles=("grid_t4-16c",))
    ]
    assert [f.level for f in check(dev_env, inv) if f.key == f"{ENV}.hosts[0].name"] == ["BLOCKER"]


def test_the_checks_load_neither_pyvmomi_nor_pulumi() -> None:
    """The GPU template rules come from components.vsphere: importing them must stay pure."""
    code = (
        "import sys, stacks.tools.preflight.checks; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyVmomi', 'pulumi', 'pulumi_vsphere')))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


TEMPLATE_BUILD = "templates/README.md"
"""The one checklist and reproducible build of both templates (issue 25, item 3)."""


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda inv: inv.vms.pop("rocky9-k8s-gpu-template"), "vcenter.template"),
        (lambda inv: inv.vms.pop("rocky9-k8s-vgpu-t4-16c"), "vcenter.gpuTemplate"),
        (
            lambda inv: inv.vms.__setitem__("rocky9-k8s-vgpu-t4-16c", [replace(_gpu_template(), snapshots=())]),
            "vcenter.gpuTemplate",
        ),
        (
            lambda inv: inv.vms.__setitem__("rocky9-k8s-gpu-template", [replace(_template(), snapshots=())]),
            "vcenter.templateSnapshot",
        ),
        (
            lambda inv: inv.vms.__setitem__("rocky9-k8s-vgpu-t4-16c", [replace(_gpu_template(), vgpu_profiles=())]),
            "vcenter.gpuTemplate",
        ),
    ],
    ids=["template-missing", "gpu-template-missing", "gpu-snapshot-missing", "snapshot-missing", "no-vgpu"],
)
def test_template_blockers_name_the_checklist_and_build(dev_env, edit, key) -> None:
    inv = _inventory()
    edit(inv)
    blockers = [f for f in check(dev_env, inv) if f.level == "BLOCKER"]
    assert [f.key for f in blockers] == [f"{ENV}.{key}"]
    assert TEMPLATE_BUILD in blockers[0].message, blockers[0].message


def test_an_unset_gpu_template_names_the_checklist_and_build() -> None:
    from components.vsphere.gpu_template import missing_gpu_template_finding

    [finding] = missing_gpu_template_finding(None)
    assert TEMPLATE_BUILD in finding.message


def _with_copies(env, copies: list[dict[str, str]], *, linked: bool = True):
    data = env.model_dump(by_alias=True)
    data["vcenter"]["templateReplicas"] = copies
    data["vm"]["linkedClone"] = linked
    return type(env).model_validate(data)


def test_template_copies_count_on_their_datastores(dev_env) -> None:
    inv = _inventory()
    inv.datastores["datastore2"] = DatastoreInfo("datastore2", 60 * 2**30, True)
    # Full clones: a copy takes the GPU template's 50 GB; two on datastore2 do not fit 60 GB.
    env = _with_copies(
        dev_env,
        [
            {"host": "esxi-01.lab.example.com", "datastore": "datastore2"},
            {"host": "esxi-02.lab.example.com", "datastore": "datastore2"},
            {"host": "esxi-03.lab.example.com"},
        ],
        linked=False,
    )
    findings = {f.key: f for f in check(env, inv) if f.key.endswith(("templateReplicas", "vcenter.datastore"))}
    copies = findings["vsphere-gpu-cluster:environment.vcenter.templateReplicas"]
    assert (
        copies.level == "BLOCKER"
        and "100 GB needed for the template copies, 60 GB free on 'datastore2'" in copies.message
    )
    assert "and 50 GB of template copies" in findings["vsphere-gpu-cluster:environment.vcenter.datastore"].message


def test_a_linked_copy_counts_small_and_an_existing_one_nothing(dev_env) -> None:
    env = _with_copies(dev_env, [{"host": "esxi-01.lab.example.com"}, {"host": "esxi-02.lab.example.com"}])
    inv = _inventory()
    inv.vms["rocky9-k8s-vgpu-t4-16c-esxi-02-dev-0123abcd"] = [replace(_gpu_template(), name="copy", moid="vm-9")]
    datastore = next(f for f in check(env, inv, stack="dev") if f.key.endswith("vcenter.datastore"))
    assert "and 1 GB of template copies" in datastore.message


def test_another_stacks_copy_of_the_template_on_the_host_is_explained_not_counted(dev_env) -> None:
    """Issue 32 item 1: another stack's copy (same template, same host) was counted as this
    stack's, "exists already"; this stack makes a copy of its own beside it."""
    env = _with_copies(dev_env, [{"host": "esxi-02.lab.example.com"}])
    inv = _inventory()
    for name in ("rocky9-k8s-vgpu-t4-16c-esxi-02-staging-0123abcd", "rocky9-k8s-vgpu-t4-16c-esxi-02-89abcdef"):
        inv.vms[name] = [replace(_gpu_template(), name=name, moid=f"vm-{len(inv.vms)}")]
    findings = check(env, inv, stack="dev")
    datastore = next(f for f in findings if f.key.endswith("vcenter.datastore"))
    assert "and 1 GB of template copies" in datastore.message  # this stack's copy is still to be made
    [other] = [f for f in findings if f.key.endswith("templateReplicas") and "another stack" in f.message]
    assert other.level == "WARN"
    assert "rocky9-k8s-vgpu-t4-16c-esxi-02-staging-0123abcd" in other.message
    assert "rocky9-k8s-vgpu-t4-16c-esxi-02-dev-" in other.message  # the name this stack's copy gets
    assert "never `pulumi import`" in other.message


def test_a_copy_deleted_or_broken_by_hand_is_reported(dev_env) -> None:
    """Issue 32 item 8: preflight said nothing of a copy deleted in vCenter (workers of the stack
    still there), or of one that lost its snapshot."""
    env = _with_copies(dev_env, [{"host": "esxi-01.lab.example.com"}, {"host": "esxi-02.lab.example.com"}])
    inv = _inventory()
    for vm_name in (env.vm_name(node) for node in env.gpu_workers.nodes):
        inv.vms[vm_name] = [replace(_gpu_template(), name=vm_name, moid=f"vm-{vm_name}", is_template=False)]
    broken = "rocky9-k8s-vgpu-t4-16c-esxi-02-dev-0123abcd"
    inv.vms[broken] = [replace(_gpu_template(), name=broken, moid="vm-9", snapshots=())]

    copies = [f for f in check(env, inv, stack="dev") if f.key.endswith("templateReplicas")]

    gone = [f for f in copies if "esxi-01" in f.message and "not found" in f.message]
    assert len(gone) == 1 and gone[0].level == "WARN", copies
    assert "deleted in vCenter" in gone[0].message and "roll" in gone[0].message
    lost = [f for f in copies if broken in f.message]
    assert len(lost) == 1 and lost[0].level == "WARN" and "no snapshot" in lost[0].message, copies
    assert "takes its snapshot again" in lost[0].message
