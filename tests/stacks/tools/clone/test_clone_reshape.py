"""`clone` reshaped (issue 54 item 3): fewer or more hosts than the source, and every value kept
from the source listed, so nothing of the source's site is kept silently."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stacks.cli import main
from stacks.environment.loader import load_environment, read_stack_file
from tests.stack_fixtures import FIXTURE_STACKS, fixture_stack

SITE = [f"esxi-{i:02}.site.example" for i in range(1, 9)]
STAGING = [f"esxi-stg-{i:02}.corp.example.com" for i in range(1, 9)]
SUBNETS = ["--vlan", "140", "--rdma-subnet", "192.168.140.0/24", "--mgmt-subnet", "10.140.0.0/24"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for stack in FIXTURE_STACKS:
        shutil.copy(fixture_stack(stack), tmp_path / f"Pulumi.{stack}.yaml")
    return tmp_path


def test_staging_with_6_of_its_8_hosts(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    maps = [arg for old, new in zip(STAGING[:6], SITE[:6], strict=True) for arg in ("--host-map", f"{old}={new}")]
    drops = [arg for old in STAGING[6:] for arg in ("--drop-host", old)]
    code = main(["clone", "staging", "site", *SUBNETS, *maps, *drops, "--dir", str(project)])
    out, err = capsys.readouterr()
    assert code == 0, err
    env = load_environment(read_stack_file(project / "Pulumi.site.yaml"))
    assert [h.name for h in env.hosts] == SITE[:6]
    assert [(n.name, n.host) for n in env.gpu_workers.nodes] == [(f"worker-{i}", SITE[i - 1]) for i in range(1, 7)]
    assert (
        "note: dropped host(s) esxi-stg-07.corp.example.com, esxi-stg-08.corp.example.com and the workers "
        "pinned there: worker-7, worker-8" in out
    )


def test_dev_with_two_more_hosts_and_every_kept_value_listed(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dev = load_environment(read_stack_file(fixture_stack("dev")))
    maps = [arg for i, h in enumerate(dev.hosts) for arg in ("--host-map", f"{h.name}={SITE[i]}")]
    adds = ["--add-host", SITE[4], "--add-host", SITE[5]]
    code = main(["clone", "dev", "site", *SUBNETS, *maps, *adds, "--dir", str(project)])
    out, err = capsys.readouterr()
    assert code == 0, err
    env = load_environment(read_stack_file(project / "Pulumi.site.yaml"))
    assert [h.name for h in env.hosts] == SITE[:6]
    assert env.hosts[5].rdma_vmnics == dev.hosts[-1].rdma_vmnics
    added = env.gpu_workers.nodes[-2:]
    assert [(n.name, n.host) for n in added] == [("worker-5", SITE[4]), ("worker-6", SITE[5])]
    addresses = [str(a) for n in env.gpu_workers.nodes for a in (n.management_ip, n.rdma_ip)]
    addresses += [str(h.vmknic_ip) for h in env.hosts]
    assert len(addresses) == len(set(addresses))  # no address twice
    # What the user was not told: dev's vCenter, templates and vGPU profile were kept.
    kept = out.split("kept from Pulumi.dev.yaml (", 1)[1]
    for line in (
        f"  vsphere:vsphereServer: {dev_server(project)}",
        f"  vsphere-gpu-cluster:environment.vcenter.datacenter: {dev.vcenter.datacenter}",
        f"  vsphere-gpu-cluster:environment.vcenter.template: {dev.vcenter.template}",
        f"  vsphere-gpu-cluster:environment.gpuWorkers.vgpuProfiles[0]: {dev.gpu_workers.vgpu_profiles[0]}",
    ):
        assert line in kept.splitlines(), line


def dev_server(project: Path) -> str:
    return str(read_stack_file(project / "Pulumi.dev.yaml").values["vsphere:vsphereServer"])


def test_unknown_hosts_to_drop_or_add_twice_are_refused_at_once(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = load_environment(read_stack_file(fixture_stack("dev")))
    maps = [arg for i, h in enumerate(dev.hosts) for arg in ("--host-map", f"{h.name}={SITE[i]}")]
    code = main(
        ["clone", "dev", "site", *SUBNETS, *maps, "--drop-host", "nope", "--add-host", SITE[0], "--dir", str(project)]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "--drop-host nope: not a host of the clone" in err
    assert f"--add-host {SITE[0]}: already a host of the clone" in err
