"""`stacks init`'s pure half: an inventory snapshot in, choices and a stack file out (no vCenter).

The estates are unlike the shipped stacks: issue 54's site (6 hosts, two L40S each, a ConnectX on
vmnic4 beside 10 Gb/s NICs without RDMA), hosts of two boards, a host without an RDMA NIC.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from components.vcenter.inventory_model import (
    DatastoreInfo,
    GpuInfo,
    HostInfo,
    Inventory,
    RdmaDeviceInfo,
    VmInfo,
)
from stacks.environment.loader import load_environment, read_stack_file
from stacks.tools.init.document import render
from stacks.tools.init.estate import EstateRefused, choose, rdma_vmnic

L40S = GpuInfo(device_name="NVIDIA L40S", vendor_name="NVIDIA Corporation", pci_id="0000:3b:00.0", memory_mb=46068)
A40 = GpuInfo(device_name="NVIDIA A40", vendor_name="NVIDIA Corporation", pci_id="0000:3b:00.0", memory_mb=46068)
L40S_PROFILES = ("nvidia_l40s-48c", "nvidia_l40s-24c", "nvidia_l40s-12c", "nvidia_l40s-48q")


def gpu_host(name: str, *, gpus: tuple[GpuInfo, ...] = (L40S, L40S), rdma: bool = True) -> HostInfo:
    return HostInfo(
        name=name,
        moid=f"host-{name}",
        cluster="GPU",
        connected=True,
        connection_state="connected",
        maintenance=False,
        version="8.0.3",
        memory_mb=1024 * 1024,
        pnics=("vmnic0", "vmnic1", "vmnic4", "vmnic5"),
        uplink_of={"vmnic0": "standard switch vSwitch0"},
        vgpu_profiles=L40S_PROFILES if gpus and gpus[0] is L40S else ("grid_a40-48c", "grid_a40-24c"),
        graphics_default="sharedDirect",
        vmknic_ips={},
        rdma_devices=(
            (
                RdmaDeviceInfo(device="vmrdma0", paired_uplink="vmnic4", roce=True),
                RdmaDeviceInfo(device="vmrdma1", paired_uplink="vmnic5", roce=True),
            )
            if rdma
            else ()
        ),
        gpus=gpus,
        link_speed_mb={"vmnic0": 10000, "vmnic1": 10000, "vmnic4": 100000, "vmnic5": 25000},
    )


def estate(hosts: list[HostInfo]) -> Inventory:
    inv = Inventory(datacenter="DC", datacenters={"DC"}, clusters={"GPU", "Mgmt"})
    inv.hosts = {h.name: h for h in hosts}
    inv.datastores = {
        "vsan-gpu": DatastoreInfo("vsan-gpu", 40 * 2**40, True),
        "local-01": DatastoreInfo("local-01", 2**40, True),
        "old-nfs": DatastoreInfo("old-nfs", 90 * 2**40, False),
    }
    inv.networks = {"VM Network", "mgmt-vlan10", "site-dvs"}
    inv.switches = {"site-dvs"}
    inv.vms = {
        "rocky9-k8s-gpu-template": [
            VmInfo("rocky9-k8s-gpu-template", "vm-1", None, False, 0, True, (), ("base",), (50.0,))
        ],
    }
    return inv


SITE = [gpu_host(f"esxi-{i:02}.site.example") for i in range(1, 7)]


def test_the_site_of_issue_54_becomes_a_stack_that_validates(tmp_path: Path) -> None:
    choices = choose(estate(SITE))
    assert [h.vmnic for h in choices.hosts] == ["vmnic4"] * 6
    assert choices.profile == "nvidia_l40s-48c"
    assert choices.gpus_per_worker == 2
    assert choices.datastore == "vsan-gpu"  # the most free space of the accessible ones
    text = render("site", choices, server="vc.site.example", insecure=False)
    path = tmp_path / "Pulumi.site.yaml"
    path.write_text(text)
    env = load_environment(read_stack_file(path))
    assert env.gpu_workers.vgpu_profiles == ["nvidia_l40s-48c", "nvidia_l40s-48c"]
    assert [n.host for n in env.gpu_workers.nodes] == [h.name for h in SITE]
    assert len(env.control_plane.nodes) == 3
    assert env.jobs.sample.slots_per_worker == 2
    # The control-plane template was found; the GPU template is named for the build to make.
    assert "control-plane template (no vGPU): found in vCenter" in text
    assert env.vcenter.gpu_template == "rocky9-k8s-vgpu-l40s-48c"  # templates/README.md's naming
    assert "GPU workers template (a nvidia_l40s-48c vGPU): BUILD it" in text


def test_names_yaml_would_misread_are_quoted(tmp_path: Path) -> None:
    inv = estate(SITE)
    inv.hosts = {name: replace(host, cluster="GPU #1: L40S") for name, host in inv.hosts.items()}
    inv.clusters = {"GPU #1: L40S"}
    inv.datastores = {"2024": DatastoreInfo("2024", 2**44, True)}
    inv.networks = {"yes"}
    path = tmp_path / "Pulumi.odd.yaml"
    path.write_text(render("odd", choose(inv), server="https://vc.site.example:443/sdk", insecure=False))
    env = load_environment(read_stack_file(path))
    assert (env.vcenter.compute_cluster, env.vcenter.datastore) == ("GPU #1: L40S", "2024")
    assert env.management_network.network_name == "yes"


def test_the_choices_say_why_and_the_decisions_are_marked() -> None:
    text = render("site", choices := choose(estate(SITE)), server="vc.site.example", insecure=False)
    assert "# vmnic4: RoCE-capable (vmrdma0), 100 Gb/s, no switch uses it; also possible: vmnic5" in text
    assert "The accessible datastore with the most free space (40960 GB free; others: local-01)" in text
    assert "one nvidia_l40s-48c per GPU: the whole GPU each (2 x NVIDIA L40S per host)" in text
    for decision in ("vmknicIp", "subnet", "gateway", "managementIp", "rdmaIp", "version", "controlPlaneEndpoint"):
        assert any(decision in line and "DECIDE" in line for line in text.splitlines()), decision
    assert "DECIDE: the control plane's size" in text
    assert choices.networks_other == ("mgmt-vlan10",)  # the distributed switch is no port group


def test_the_fastest_free_roce_nic_is_chosen() -> None:
    host = replace(SITE[0], link_speed_mb={"vmnic4": 25000, "vmnic5": 100000})
    assert rdma_vmnic(host)[0] == "vmnic5"
    taken = replace(SITE[0], uplink_of={"vmnic4": "distributed switch other"})
    assert rdma_vmnic(taken)[0] == "vmnic5"


def test_a_host_without_an_rdma_nic_is_refused_by_name() -> None:
    hosts = [*SITE[:5], gpu_host("esxi-06.site.example", rdma=False)]
    with pytest.raises(EstateRefused) as refused:
        choose(estate(hosts))
    assert refused.value.problems == [
        "host 'esxi-06.site.example' has no RDMA-capable (RoCE) NIC: PVRDMA needs a ConnectX-class NIC with its "
        "RDMA driver (nmlx5_rdma); install one, or leave the host out with --hosts"
    ]
    # Left out on request, the other five make a stack.
    assert len(choose(estate(hosts), hosts=[h.name for h in SITE[:5]]).hosts) == 5


def test_mixed_boards_on_one_host_are_refused_and_every_problem_is_listed() -> None:
    hosts = [
        *SITE[:4],
        gpu_host("esxi-05.site.example", gpus=(L40S, A40)),
        gpu_host("esxi-06.site.example", rdma=False),
    ]
    with pytest.raises(EstateRefused) as refused:
        choose(estate(hosts))
    problems = refused.value.problems
    assert "host 'esxi-05.site.example' has GPUs of several boards (a40, l40s)" in problems[0]
    assert len(problems) == 2 and "esxi-06.site.example" in problems[1]


def test_hosts_of_another_board_are_left_out_and_named() -> None:
    hosts = [*SITE[:4], gpu_host("esxi-05.site.example", gpus=(A40,)), gpu_host("esxi-06.site.example", gpus=(A40,))]
    choices = choose(estate(hosts))
    assert choices.profile == "nvidia_l40s-48c"
    assert [h.name for h in choices.hosts] == [h.name for h in SITE[:4]]
    assert choices.left_out == (
        "esxi-05.site.example: NVIDIA A40, the stack's workers use NVIDIA L40S",
        "esxi-06.site.example: NVIDIA A40, the stack's workers use NVIDIA L40S",
    )
    text = render("mixed", choices, server="vc", insecure=True)
    assert "# Left out: esxi-05.site.example: NVIDIA A40, the stack's workers use NVIDIA L40S." in text


def test_no_gpu_host_at_all_is_refused() -> None:
    bare = replace(SITE[0], gpus=())
    with pytest.raises(EstateRefused, match="no host with an NVIDIA GPU"):
        choose(estate([bare]))


def test_a_host_without_the_full_gpu_profile_names_what_it_offers() -> None:
    no_driver = replace(SITE[0], vgpu_profiles=())
    with pytest.raises(EstateRefused, match=r"does not offer 'nvidia_l40s-48c' \(offered: none"):
        choose(estate([no_driver, *SITE[1:]]))


def test_the_command_names_each_missing_variable_and_a_bad_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stacks.cli import main

    for name in ("VSPHERE_SERVER", "VSPHERE_USER", "VSPHERE_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "Pulumi.site.yaml"
    assert main(["init", "site", "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "error: VSPHERE_SERVER is not set: export it or pass --server",
        "error: VSPHERE_USER is not set: export it (a read-only account is enough)",
        "error: VSPHERE_PASSWORD is not set: export it (a read-only account is enough)",
    ]
    assert main(["init", "Site_1", "--out", str(out)]) == 2
    assert "'Site_1' cannot be a stack name here" in capsys.readouterr().err
    out.write_text("config: {}\n")
    assert main(["init", "site", "--out", str(out)]) == 2
    assert "exists; pass --force to overwrite it" in capsys.readouterr().err
    assert not (tmp_path / "Pulumi.Site_1.yaml").exists()
