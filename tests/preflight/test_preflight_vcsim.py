"""`python -m stacks preflight` against the vCenter simulator: a matching inventory passes, each
planted problem is reported with its key path, and nothing ever ends in a traceback."""

from __future__ import annotations

import copy
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks.tools.cli import main

from .conftest import BARE_TEMPLATE, HOG_HOST, HOG_RESERVATION_MB, TAKEN_VM, TEMPLATE, Planted

pytestmark = pytest.mark.vcsim

ENV = "vsphere-gpu-cluster:environment"

BASE: dict[str, Any] = {
    "name": "sim",
    "vcenter": {
        "datacenter": "DC0",
        "computeCluster": "DC0_C0",
        "datastore": "LocalDS_0",
        "folder": "preflight",
        "template": TEMPLATE,
        "templateSnapshot": "base",
    },
    "vm": {"namePrefix": "pf-gpu", "linkedClone": True},
    "hosts": [
        {"name": "DC0_C0_H0", "rdmaVmnics": ["vmnic4"], "vmknicIp": "192.168.0.24"},
        {"name": "DC0_C0_H1", "rdmaVmnics": ["vmnic4"], "vmknicIp": "192.168.0.25"},
    ],
    "rdmaNetwork": {
        "switchName": "pf-rdma-dvs",
        "switchVersion": "6.5.0",  # the simulator's hosts run ESXi 6.5.0
        "portGroupName": "pf-pvrdma",
        "subnet": "192.168.0.0/24",
    },
    "managementNetwork": {
        "networkName": "VM Network",
        "subnet": "10.10.0.0/24",
        "gateway": "10.10.0.1",
        "dnsServers": ["10.10.0.2"],
        "dnsDomain": "lab.example.com",
    },
    "controlPlane": {"memoryMb": 2048, "diskGb": 20, "nodes": [{"name": "master", "managementIp": "10.10.0.50"}]},
    "gpuWorkers": {
        "memoryMb": 2048,  # the simulator's hosts have 4 GB
        "diskGb": 20,
        "vgpuProfiles": ["grid_t4-16c"],
        "nodes": [
            {"name": "worker-1", "managementIp": "10.10.0.51", "rdmaIp": "192.168.0.51", "host": "DC0_C0_H0"},
            {"name": "worker-2", "managementIp": "10.10.0.52", "rdmaIp": "192.168.0.52", "host": "DC0_C0_H1"},
        ],
    },
}


@pytest.fixture
def preflight(
    planted: Planted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, list[str]]]:
    """preflight(env_dict) -> (exit status, stdout lines), credentials from the environment."""

    def run(env: dict[str, Any], server: str | None = None) -> tuple[int, list[str]]:
        path = tmp_path / "Pulumi.sim.yaml"
        path.write_text(yaml.safe_dump({"config": {ENV: env}}, sort_keys=False))
        code = main(["preflight", "sim", "--file", str(path), "--server", server or planted.sim.server])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.out + captured.err
        return code, captured.out.splitlines()

    return run


@pytest.fixture(autouse=True)
def credentials(planted: Planted, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VSPHERE_USER", planted.sim.user)
    monkeypatch.setenv("VSPHERE_PASSWORD", planted.sim.password)


def changed(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    env = copy.deepcopy(BASE)
    edit(env)
    return env


def blockers(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("BLOCKER")]


def test_matching_inventory_passes(preflight) -> None:
    code, lines = preflight(BASE)
    assert code == 0, "\n".join(lines)
    assert blockers(lines) == []
    assert f"OK      {ENV}.vcenter.templateSnapshot: template has exactly one snapshot, 'base'" in lines
    assert any(line.startswith(f"OK      {ENV}.vcenter.datastore: ") for line in lines)
    assert any(line.startswith(f"OK      {ENV}.hosts[1]: host 'DC0_C0_H1': connected") for line in lines)
    assert lines[-1].startswith("preflight sim against http://127.0.0.1:")
    assert ": ready: 0 blocker(s)" in lines[-1]


def _set(path: list[str | int], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(env: dict[str, Any]) -> None:
        target: Any = env
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _rename_host(name: str) -> Callable[[dict[str, Any]], None]:
    """Point hosts[0] and the worker pinned to it at another host name."""

    def edit(env: dict[str, Any]) -> None:
        env["hosts"][0]["name"] = name
        env["gpuWorkers"]["nodes"][0]["host"] = name

    return edit


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(
            _set(["vcenter", "datastore"], "NoSuchDS"),
            f"BLOCKER {ENV}.vcenter.datastore: datastore 'NoSuchDS' not found (datastores: LocalDS_0)",
            id="missing-datastore",
        ),
        pytest.param(
            _set(["hosts", 1, "rdmaVmnics"], ["vmnic9"]),
            f"BLOCKER {ENV}.hosts[1].rdmaVmnics[0]: host 'DC0_C0_H1' has no vmnic9 "
            "(physical NICs: vmnic0, vmnic1, vmnic4, vmnic5)",
            id="host-lacks-vmnic",
        ),
        pytest.param(
            _set(["gpuWorkers", "vgpuProfiles"], ["grid_a100-40c"]),
            f"BLOCKER {ENV}.gpuWorkers.vgpuProfiles[0]: host 'DC0_C0_H0' does not offer vGPU profile "
            "'grid_a100-40c' (offered: grid_t4-1c, grid_t4-2c, grid_t4-4c, grid_t4-8c, grid_t4-16c)",
            id="vgpu-profile-not-offered",
        ),
        pytest.param(
            _set(["vcenter", "template"], BARE_TEMPLATE),
            f"BLOCKER {ENV}.vcenter.templateSnapshot: template '{BARE_TEMPLATE}' has no snapshot; linked clones "
            "need exactly one, named 'base' (take one, or set vm.linkedClone: false)",
            id="template-without-snapshot",
        ),
        pytest.param(
            _set(["vcenter", "templateSnapshot"], "golden"),
            f"BLOCKER {ENV}.vcenter.templateSnapshot: template '{TEMPLATE}''s only snapshot is 'base', not 'golden'",
            id="wrong-snapshot-name",
        ),
        pytest.param(
            _set(["gpuWorkers", "memoryMb"], 8192),
            f"BLOCKER {ENV}.gpuWorkers.nodes[0].host: not enough memory on 'DC0_C0_H0': workers worker-1 "
            "reserve 8192 MB; the host has 4095 MB, 4095 MB not reserved by other powered-on VMs",
            id="not-enough-memory",
        ),
        pytest.param(
            _set(["vcenter", "template"], "no-such-template"),
            f"BLOCKER {ENV}.vcenter.template: template 'no-such-template' not found",
            id="missing-template",
        ),
        pytest.param(
            _set(["vcenter", "computeCluster"], "GPU-Cluster"),
            f"BLOCKER {ENV}.vcenter.computeCluster: cluster 'GPU-Cluster' not found (clusters: DC0_C0)",
            id="missing-cluster",
        ),
        pytest.param(
            _set(["vcenter", "datacenter"], "Datacenter"),
            f"BLOCKER {ENV}.vcenter.datacenter: datacenter 'Datacenter' not found",
            id="missing-datacenter",
        ),
        pytest.param(
            _set(["vcenter", "folder"], "gpu-cluster/dev"),
            f"BLOCKER {ENV}.vcenter.folder: parent folder 'gpu-cluster' of 'gpu-cluster/dev' not found; "
            "the program creates only the last folder, so create 'gpu-cluster' first",
            id="missing-parent-folder",
        ),
        pytest.param(
            _set(["vcenter", "resourcePool"], "gpu-pool"),
            f"BLOCKER {ENV}.vcenter.resourcePool: resource pool 'gpu-pool' not found in cluster 'DC0_C0'; "
            "create it, or remove the key to use the cluster's root pool",
            id="missing-resource-pool",
        ),
        pytest.param(
            _set(["managementNetwork", "networkName"], "mgmt"),
            f"BLOCKER {ENV}.managementNetwork.networkName: network 'mgmt' not found",
            id="missing-network",
        ),
        pytest.param(
            _rename_host("esxi-99"),
            f"BLOCKER {ENV}.hosts[0].name: host 'esxi-99' not found",
            id="missing-host",
        ),
        pytest.param(
            _rename_host("DC0_H0"),
            f"BLOCKER {ENV}.hosts[0].name: host 'DC0_H0' is in no cluster (standalone), not in 'DC0_C0'",
            id="host-outside-cluster",
        ),
        pytest.param(
            _set(["rdmaNetwork", "switchVersion"], "8.0.0"),
            f"BLOCKER {ENV}.rdmaNetwork.switchVersion: host 'DC0_C0_H0' runs ESXi 6.5.0, older than the switch "
            "version 8.0.0; lower switchVersion or upgrade the host",
            id="switch-newer-than-hosts",
        ),
    ],
)
def test_planted_problem_is_a_blocker(preflight, edit: Callable[[dict[str, Any]], None], expected: str) -> None:
    code, lines = preflight(changed(edit))
    assert code == 1, "\n".join(lines)
    assert expected in lines, "\n".join(lines)
    assert ": blocked: " in lines[-1]


def test_existing_reservations_count_against_a_host(preflight, planted: Planted) -> None:
    host = planted.hog_host
    assert host == HOG_HOST

    def edit(env: dict[str, Any]) -> None:
        env["hosts"] = [{"name": host, "rdmaVmnics": ["vmnic4"], "vmknicIp": "192.168.0.24"}]
        env["gpuWorkers"]["nodes"] = [BASE["gpuWorkers"]["nodes"][0] | {"host": host}]

    code, lines = preflight(changed(edit))
    assert code == 1
    free = 4095 - HOG_RESERVATION_MB
    assert (
        f"BLOCKER {ENV}.gpuWorkers.nodes[0].host: not enough memory on '{host}': workers worker-1 reserve 2048 MB; "
        f"the host has 4095 MB, {free} MB not reserved by other powered-on VMs"
    ) in lines


def test_taken_vm_name_is_a_warning(preflight) -> None:
    code, lines = preflight(changed(_set(["vm", "namePrefix"], "taken")))
    assert code == 0, "\n".join(lines)
    assert (
        f"WARN    {ENV}.gpuWorkers.nodes[0].name: VM '{TAKEN_VM}' exists already (fine if this stack created it)"
        in lines
    )
    assert "1 warning(s)" in lines[-1]


def test_existing_switch_name_is_a_warning(preflight) -> None:
    code, lines = preflight(changed(_set(["rdmaNetwork", "switchName"], "DVS0")))
    assert code == 0
    assert (
        f"WARN    {ENV}.rdmaNetwork.switchName: distributed switch 'DVS0' exists already (fine if this stack created it)"
        in lines
    )


def test_full_clones_count_disks_on_the_datastore(preflight) -> None:
    def edit(env: dict[str, Any]) -> None:
        env["vm"]["linkedClone"] = False
        env["gpuWorkers"]["diskGb"] = 200  # 2 x 200 GB + master 20 GB + its 2 GB swap > ~229 GB free

    code, lines = preflight(changed(edit))
    assert code == 1
    datastore = [line for line in lines if f"{ENV}.vcenter.datastore:" in line]
    assert len(datastore) == 1 and datastore[0].startswith("BLOCKER ")
    assert "422 GB needed for the new VMs' disks and swap" in datastore[0]


def test_unreachable_vcenter_is_one_line(preflight) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, lines = preflight(BASE, server=f"http://127.0.0.1:{port}")
    assert code == 1
    assert lines == [
        f"BLOCKER vsphere:vsphereServer: cannot connect to vCenter http://127.0.0.1:{port}: "
        "ConnectionRefusedError: [Errno 111] Connection refused"
    ]


def test_wrong_password_is_one_line(preflight, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VSPHERE_PASSWORD", "wrong")
    code, lines = preflight(BASE)
    assert code == 1
    assert len(lines) == 1 and "refused the login of user" in lines[0]
