"""Preflight without vCenter: exit statuses for bad input, and the checks the simulator cannot
stage (guest IPs, uplinks in use, host graphics), judged on a hand-built inventory snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stacks.environment.loader import load_environment, read_stack_file
from stacks.tools.cli import main
from stacks.tools.preflight_checks import DatastoreInfo, HostInfo, Inventory, VmInfo, check

ROOT = Path(__file__).resolve().parents[2]
ENV = "vsphere-gpu-cluster:environment"


def test_invalid_stack_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump({"config": {ENV: {"name": "Bad Name"}}}))
    assert main(["preflight", "bad", "--file", str(path), "--server", "http://127.0.0.1:9"]) == 2
    captured = capsys.readouterr()
    assert f"{ENV}.name: " in captured.err
    assert "Traceback" not in captured.out + captured.err


def test_missing_credentials_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("VSPHERE_SERVER", "VSPHERE_USER", "VSPHERE_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    assert main(["preflight", "dev", "--file", str(ROOT / "Pulumi.dev.yaml")]) == 2
    err = capsys.readouterr().err
    assert "vsphere:password (or env VSPHERE_PASSWORD)" in err
    assert len(err.strip().splitlines()) == 1


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
    }
    values.update(overrides)
    return HostInfo(**values)  # type: ignore[arg-type]


def _template() -> VmInfo:
    return VmInfo("rocky9-k8s-gpu-template", "vm-1", None, False, 0, True, (), ("base",), (50.0,))


def _inventory(**host_overrides: object) -> Inventory:
    env = load_environment(read_stack_file(ROOT / "Pulumi.dev.yaml"))
    hosts = {h.name: _host(h.name, **host_overrides) for h in env.hosts}
    return Inventory(
        datacenter="Datacenter",
        clusters={"GPU-Cluster"},
        hosts=hosts,
        vms={"rocky9-k8s-gpu-template": [_template()]},
        datastores={"datastore1": DatastoreInfo("datastore1", 2**40, True)},
        networks={"VM Network"},
        folders={"gpu-cluster"},
    )


@pytest.fixture
def dev_env():
    return load_environment(read_stack_file(ROOT / "Pulumi.dev.yaml"))


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
    assert len(blockers) == 4
    assert blockers[0] == (
        f"BLOCKER {ENV}.hosts[0].rdmaVmnics[0]: vmnic4 on 'esxi-01.lab.example.com' is already an uplink of "
        "standard switch vSwitch1; free it for the RDMA switch"
    )
    ours = _inventory(uplink_of={"vmnic4": "distributed switch dev-rdma-dvs"})  # a re-run: our own switch
    assert [f for f in check(dev_env, ours) if f.level == "BLOCKER"] == []


def test_unmanaged_host_graphics_must_be_shared_direct(dev_env) -> None:
    env = dev_env.model_copy(update={"host_graphics": dev_env.host_graphics.model_copy(update={"manage": False})})
    assert [f for f in check(env, _inventory()) if f.level == "BLOCKER"] == []
    blockers = [f.render() for f in check(env, _inventory(graphics_default="shared")) if f.level == "BLOCKER"]
    assert len(blockers) == 4
    assert blockers[0].startswith(
        f"BLOCKER {ENV}.hostGraphics.manage: host 'esxi-01.lab.example.com' default graphics type is 'shared'"
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
    inv.vms["rocky9-k8s-gpu-template"] = [
        VmInfo("rocky9-k8s-gpu-template", "vm-1", None, False, 0, True, (), ("base",), (30.0,))
    ]
    warnings = [f.render() for f in check(dev_env, inv) if f.level == "WARN"]
    assert warnings == [
        f"WARN    {ENV}.gpuWorkers.diskGb: linked clones keep the template's 30 GB disk; diskGb 50 is ignored"
    ]
