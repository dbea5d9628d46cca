"""`stacks init` against the vCenter simulator, on estates unlike the shipped stacks (issue 54).

The harness serves an inventory JSON (vcsim/stack_inventory.go): 6 ESXi 8 hosts with two L40S each
(`HostConfigInfo.graphicsInfo[]`, `sharedPassthruGpuTypes`), ConnectX-style vmnic4/vmnic5 with
their RoCE devices (`HostNetworkInfo.rdmaDevice[]`, vcsim/preflight.go). Then, as the issue's
user: init writes the stack, it validates and plans with two vGPUs per worker, and the simulator
serving that stack (`scripts/simulator.sh STACK`'s runner) passes preflight with 0 BLOCKER.
Refusals: a host whose NICs have no RDMA device (`-rdma-unpaired`), a host with two boards.

Without Go or the harness the tests skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stacks import PROJECT_DIR
from stacks.cli import main
from stacks.environment.loader import load_environment, read_stack_file
from stacks.tools.simulator.command import HARNESS, SimulatorError, plant_over_api, start, start_inventory, stop
from stacks.tools.simulator.plant import datastore_free_gb
from tests.real_parts import unavailable

pytestmark = pytest.mark.vcsim

L40S = {"deviceName": "NVIDIA L40S", "memoryMb": 46068}
A40 = {"deviceName": "NVIDIA A40", "memoryMb": 46068}
L40S_PROFILES = ["nvidia_l40s-48c", "nvidia_l40s-24c", "nvidia_l40s-16c", "nvidia_l40s-48q"]
A40_PROFILES = ["grid_a40-48c", "grid_a40-24c", "grid_a40-48q"]
HOSTS = [f"esxi-{i:02}.site.example" for i in range(1, 7)]


def site(gpus: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    gpus = gpus or {}
    return {
        "datacenter": "Site-DC",
        "cluster": "GPU-Site",
        "datastore": "vsan-site",
        "datastoreFreeGb": 40960,
        "network": "site-mgmt",
        "hosts": [
            {
                "name": name,
                "esxiVersion": "8.0.3",
                "memoryMb": 1024 * 1024,
                "gpus": gpus.get(name, [L40S, L40S]),
                "vgpuProfiles": A40_PROFILES if gpus.get(name) == [A40] else L40S_PROFILES,
            }
            for name in HOSTS
        ],
    }


def flags(inventory: Path, *extra: str) -> list[str]:
    return [
        "-stack-inventory",
        str(inventory),
        "-api-version",
        "7.0.3.0",
        "-pnics",
        "vmnic4,vmnic5",
        "-graphics-default",
        "sharedDirect",
        *extra,
    ]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    if not HARNESS.exists():
        unavailable("vCenter simulator", f"{HARNESS} is missing (bash scripts/build-vcsim.sh)")
    processes: list[subprocess.Popen[bytes]] = []

    def run(inventory: dict[str, Any], *extra: str) -> str:
        workdir = tmp_path / f"sim-{len(processes)}"
        workdir.mkdir()
        try:
            process, url = start_inventory(
                inventory, flags(workdir / "stack-inventory.json", *extra), port=0, workdir=workdir
            )
        except SimulatorError as error:
            unavailable("vCenter simulator", str(error))
        processes.append(process)
        return url

    yield run
    for process in processes:
        stop(process)


def _login(url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    parts = urllib.parse.urlsplit(url)
    monkeypatch.setenv("VSPHERE_USER", urllib.parse.unquote(parts.username or ""))
    monkeypatch.setenv("VSPHERE_PASSWORD", urllib.parse.unquote(parts.password or ""))
    monkeypatch.delenv("VSPHERE_SERVER", raising=False)
    return f"{parts.scheme}://{parts.hostname}:{parts.port}"


def test_init_on_the_issue_54_site_validates_plans_and_passes_preflight(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = _login(serve(site()), monkeypatch)
    path = tmp_path / "Pulumi.site.yaml"
    assert main(["init", "site", "--out", str(path), "--server", server, "--insecure"]) == 0
    assert f"wrote {path}: 6 GPU hosts of 'GPU-Site', 2 x nvidia_l40s-48c per worker" in capsys.readouterr().out
    text = path.read_text()
    assert "# vmnic4: RoCE-capable (vmrdma0), 100 Gb/s, no switch uses it; also possible: vmnic5" in text
    env = load_environment(read_stack_file(path))
    assert env.gpu_workers.vgpu_profiles == ["nvidia_l40s-48c"] * 2
    assert [h.name for h in env.hosts] == HOSTS
    assert env.vcenter.datastore == "vsan-site" and env.management_network.network_name == "site-mgmt"

    # It plans as written (the addresses are the only edit it needs), each worker with two vGPUs.
    out = tmp_path / "plan"
    result = subprocess.run(
        [sys.executable, "-m", "stacks", "plan", "site", "--file", str(path), "--out", str(out), "--json"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    resources = json.loads((out / "resources.json").read_text())["resources"]
    vgpus = [r for r in resources if r.get("type", "").endswith("VgpuAttachment")]
    assert len(vgpus) == 6
    assert all(len(r["inputs"]["profiles"]) == 2 for r in vgpus), vgpus[0]

    # `scripts/simulator.sh site` + `preflight site`: the simulator serving the new stack, 0 BLOCKER.
    with_sim = tmp_path / "served"
    with_sim.mkdir()
    process, url = start(env, port=0, workdir=with_sim)
    try:
        plant_over_api(env, url)
        server = _login(url, monkeypatch)
        capsys.readouterr()
        code = main(["preflight", "site", "--file", str(path), "--server", server])
        lines = capsys.readouterr().out.splitlines()
    finally:
        stop(process)
    assert [line for line in lines if line.startswith("BLOCKER")] == []
    assert code == 0 and ": ready: 0 BLOCKER" in lines[-1]
    # The simulator serves a datastore of the stack's size, not the free space of its own disk.
    # (less the two planted templates' disks, which vcsim subtracts in full).
    free = datastore_free_gb(env) - 2 * env.gpu_workers.disk_gb
    assert any(line.startswith("OK") and f", {free} GB free on 'vsan-site'" in line for line in lines), lines
    assert any(line.startswith("OK") and "network 'site-mgmt' exists" in line for line in lines), lines


def test_a_host_without_an_rdma_nic_and_a_host_of_two_boards_are_refused(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mixed = site({HOSTS[4]: [L40S, A40]})
    no_rdma = f"{HOSTS[5]}:vmnic4,{HOSTS[5]}:vmnic5"
    server = _login(serve(mixed, "-rdma-unpaired", no_rdma), monkeypatch)
    path = tmp_path / "Pulumi.site.yaml"
    assert main(["init", "site", "--out", str(path), "--server", server, "--insecure"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(
        f"error: host '{HOSTS[4]}' has GPUs of several boards (a40, l40s); one worker's vGPUs come from one board"
    )
    assert err[1].startswith(f"error: host '{HOSTS[5]}' has no RDMA-capable (RoCE) NIC")
    assert err[-1] == "2 problem(s): nothing written"
    assert not path.exists()
    # A datacenter that is not there is named with those that are.
    assert main(["init", "site", "--out", str(path), "--server", server, "--datacenter", "Nope"]) == 1
    assert "--datacenter: no datacenter 'Nope' in http://127.0.0.1:" in capsys.readouterr().err
    # Leaving both out makes a stack of the other four.
    hosts = ",".join(HOSTS[:4])
    assert main(["init", "site", "--out", str(path), "--server", server, "--insecure", "--hosts", hosts]) == 0
    assert [h.name for h in load_environment(read_stack_file(path)).hosts] == HOSTS[:4]


def test_hosts_of_another_board_are_left_out_and_named(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = _login(serve(site({HOSTS[4]: [A40], HOSTS[5]: [A40]})), monkeypatch)
    path = tmp_path / "Pulumi.site.yaml"
    assert main(["init", "site", "--out", str(path), "--server", server, "--insecure"]) == 0
    text = path.read_text()
    for host in HOSTS[4:]:
        assert f"# Left out: {host}: NVIDIA A40, the stack's workers use NVIDIA L40S." in text
    env = load_environment(read_stack_file(path))
    assert [h.name for h in env.hosts] == HOSTS[:4]
    assert env.gpu_workers.vgpu_profiles == ["nvidia_l40s-48c"] * 2
