"""`python -m stacks preflight` against the vCenter simulator: a matching inventory passes, each
planted problem is reported with its key path, and nothing ever ends in a traceback."""

from __future__ import annotations

import copy
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from .conftest import (
    BARE_TEMPLATE,
    GPU_TEMPLATE,
    GPU_TEMPLATE_8C,
    GPU_USER_HOST,
    GPU_USER_PROFILE,
    GPU_USER_VM,
    HOG_HOST,
    HOG_RESERVATION_MB,
    NEWER_HOST,
    NEWER_HOST_VERSION,
    NO_ROCE,
    TAKEN_VM,
    TEMPLATE,
    UNPAIRED,
    Planted,
    _find,
)

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
        "gpuTemplate": GPU_TEMPLATE,
        "templateSnapshot": "base",
    },
    # Hardware version 13: the simulator's hosts run ESXi 6.5 (one runs 7.0.2, see conftest).
    "vm": {"namePrefix": "pf-gpu", "linkedClone": True, "hardwareVersion": 13},
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
    assert ": ready: 0 BLOCKER, " in lines[-1]
    assert lines[0] == (
        "connection settings: vsphere:vsphereServer from --server, vsphere:user from environment VSPHERE_USER, "
        "vsphere:password from environment VSPHERE_PASSWORD"
    )
    for name in ("DC0_C0_H0", "DC0_C0_H1"):
        index = int(name[-1])
        assert (
            f"OK      {ENV}.hosts[{index}].rdmaVmnics[0]: vmnic4 on '{name}' is paired with RoCE device vmrdma0"
            in lines
        )
    assert f"OK      {ENV}.vcenter.template: template {TEMPLATE} carries no vGPU" in lines
    assert f"OK      {ENV}.vcenter.gpuTemplate: template {GPU_TEMPLATE} carries grid_t4-16c" in lines
    assert f"OK      {ENV}.vcenter.gpuTemplate: GPU template '{GPU_TEMPLATE}' has exactly one snapshot, 'base'" in lines
    assert any(line.startswith(f"OK      {ENV}.vm.hardwareVersion: hardware version 13 runs") for line in lines)


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
            # Both hosts in one line (checks.report.grouped).
            f"BLOCKER {ENV}.gpuWorkers.vgpuProfiles[0]: each of hosts 'DC0_C0_H0', 'DC0_C0_H1' does not offer vGPU profile "
            "'grid_a100-40c' (offered: grid_t4-4c, grid_t4-8c, grid_t4-16c)",
            id="vgpu-profile-not-offered",
        ),
        pytest.param(
            _set(["vcenter", "template"], BARE_TEMPLATE),
            f"BLOCKER {ENV}.vcenter.templateSnapshot: template '{BARE_TEMPLATE}' has no snapshot; linked clones "
            "need exactly one, named 'base' (take one, or set vm.linkedClone: false; templates/README.md: the checklist "
            "and a Packer build of both templates)",
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
            f"BLOCKER {ENV}.vcenter.template: template 'no-such-template' not found; build it (templates/README.md: "
            "the checklist and a Packer build of both templates)",
            id="missing-template",
        ),
        pytest.param(
            _set(["vcenter", "computeCluster"], "GPU-Cluster"),
            f"BLOCKER {ENV}.vcenter.computeCluster: cluster 'GPU-Cluster' not found (clusters: DC0_C0)",
            id="missing-cluster",
        ),
        pytest.param(
            _set(["vcenter", "datacenter"], "Datacenter"),
            f"BLOCKER {ENV}.vcenter.datacenter: datacenter 'Datacenter' not found (datacenters: DC0)",
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
            f"BLOCKER {ENV}.hosts[0].name: host 'esxi-99' not found (hosts in datacenter 'DC0': DC0_C0_H0, "
            "DC0_C0_H1, DC0_C0_H2, DC0_C0_H3, DC0_H0)",
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
    assert ": ready: 0 BLOCKER, 1 WARN, " in lines[-1]


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


def test_unreachable_vcenter_is_one_finding(preflight) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, lines = preflight(BASE, server=f"http://127.0.0.1:{port}")
    assert code == 1
    assert lines[1:] == [
        f"BLOCKER vsphere:vsphereServer: cannot reach vCenter http://127.0.0.1:{port}: "
        "ConnectionRefusedError: [Errno 111] Connection refused",
        f"preflight sim against http://127.0.0.1:{port}: blocked: 1 BLOCKER, 0 WARN, 0 OK",
    ]


def test_a_vcenter_that_never_answers_fails_within_the_login_timeout(preflight) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts (kernel backlog), never answers
        port = silent.getsockname()[1]
        start = time.monotonic()
        code, lines = preflight(BASE, f"http://127.0.0.1:{port}", "--login-timeout", "1")
        took = time.monotonic() - start
    assert code == 1
    assert lines[1].startswith(
        f"BLOCKER vsphere:vsphereServer: vCenter http://127.0.0.1:{port} did not answer within 1s"
    ), lines
    assert took < 10


def test_wrong_password_is_reported_under_the_password_key(preflight, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VSPHERE_PASSWORD", "wrong")
    code, lines = preflight(BASE)
    assert code == 1
    assert len(lines) == 3, lines
    assert lines[1].startswith("BLOCKER vsphere:password: vCenter http://127.0.0.1:")
    assert "refused the login of user 'user'" in lines[1]
    assert "check vsphere:password (from environment VSPHERE_PASSWORD) and vsphere:user" in lines[1]
    assert lines[2].endswith(": blocked: 1 BLOCKER, 0 WARN, 0 OK")


def test_preflight_logs_its_session_out(preflight, planted: Planted) -> None:
    sim = planted.sim
    watcher = SmartConnect(protocol="http", host="127.0.0.1", port=sim.parts.port, user=sim.user, pwd=sim.password)
    try:
        before = {s.key for s in watcher.content.sessionManager.sessionList}
        for _ in range(2):
            code, _ = preflight(BASE)
            assert code == 0
        after = {s.key for s in watcher.content.sessionManager.sessionList}
    finally:
        Disconnect(watcher)
    assert after == before


# --- issue 14 defect 8: what preflight did not check ---------------------------------------


def _second_host(name: str, vmnic: str) -> Callable[[dict[str, Any]], None]:
    """hosts[1] (and worker-2, pinned to it) moved to another host and RDMA vmnic."""

    def edit(env: dict[str, Any]) -> None:
        env["hosts"][1] = {"name": name, "rdmaVmnics": [vmnic], "vmknicIp": "192.168.0.25"}
        env["gpuWorkers"]["nodes"][1]["host"] = name

    return edit


def test_rdma_vmnic_without_a_paired_rdma_device_is_a_blocker(preflight) -> None:
    host, vmnic = UNPAIRED
    code, lines = preflight(changed(_second_host(host, vmnic)))
    assert code == 1
    ours = [line for line in lines if line.startswith(f"BLOCKER {ENV}.hosts[1].rdmaVmnics[0]:")]
    assert ours == [
        f"BLOCKER {ENV}.hosts[1].rdmaVmnics[0]: {vmnic} on '{host}' has no RDMA device paired with it "
        "(rdmaDevice[].backing.pairedUplink; host's RDMA devices: vmrdma0->vmnic4); PVRDMA between hosts would "
        "fall back to TCP. Use the vmnic of the RoCE HCA (esxcli rdma device list), or install its RDMA driver"
    ]


def test_rdma_device_without_roce_is_a_blocker(preflight) -> None:
    host, vmnic = NO_ROCE
    code, lines = preflight(changed(_second_host(host, vmnic)))
    assert code == 1
    assert (
        f"BLOCKER {ENV}.hosts[1].rdmaVmnics[0]: {vmnic} on '{host}' is paired with vmrdma1, which is not "
        "RoCE-capable (capability.roceV1Capable/roceV2Capable false); PVRDMA needs RoCE"
    ) in lines


def test_hardware_version_newer_than_a_host_is_a_blocker(preflight) -> None:
    code, lines = preflight(changed(_set(["vm", "hardwareVersion"], 19)))
    assert code == 1
    # DC0_C0_H1 runs 7.0.2 (7.0 U2, enough for 19); DC0_C0_H0 runs 6.5.0.
    assert (
        f"BLOCKER {ENV}.vm.hardwareVersion: hardware version 19 needs ESXi 7.0 U2 or later (KB 2007240); GPU hosts "
        "'DC0_C0_H0' (ESXi 6.5.0) are older: lower vm.hardwareVersion or upgrade them"
    ) in lines
    assert NEWER_HOST_VERSION == "7.0.2" and NEWER_HOST == "DC0_C0_H1"


def _on_gpu_user_host(profile: str) -> Callable[[dict[str, Any]], None]:
    def edit(env: dict[str, Any]) -> None:
        _second_host(GPU_USER_HOST, "vmnic4")(env)
        env["gpuWorkers"]["vgpuProfiles"] = [profile]
        env["vcenter"]["gpuTemplate"] = {GPU_USER_PROFILE: GPU_TEMPLATE_8C}.get(profile, GPU_TEMPLATE)

    return edit


def test_gpu_taken_by_another_vm_is_a_blocker(preflight) -> None:
    code, lines = preflight(changed(_on_gpu_user_host("grid_t4-16c")))
    assert code == 1
    assert (
        f"BLOCKER {ENV}.hosts[1].name: GPUs of '{GPU_USER_HOST}' are taken by VMs not of this stack: "
        f"{GPU_USER_VM} ({GPU_USER_PROFILE}); 1 GPU(s), 1 x grid_t4-16c needed, 0 free. Move or power off "
        "those VMs, or pin the workers elsewhere"
    ) in lines


def test_gpu_shared_with_another_vm_of_the_same_profile_is_a_warning(preflight) -> None:
    code, lines = preflight(changed(_on_gpu_user_host(GPU_USER_PROFILE)))
    assert code == 0, "\n".join(lines)
    assert (
        f"WARN    {ENV}.hosts[1].name: other VMs on '{GPU_USER_HOST}' use vGPUs: {GPU_USER_VM} ({GPU_USER_PROFILE}); "
        "enough left for this stack's workers"
    ) in lines


@pytest.fixture
def admin(planted: Planted) -> Iterator[Any]:
    """A session of our own, to set permissions and roles as a vCenter administrator would."""
    sim = planted.sim
    si = SmartConnect(protocol="http", host="127.0.0.1", port=sim.parts.port, user=sim.user, pwd=sim.password)
    yield si
    Disconnect(si)


@pytest.fixture
def permission(planted: Planted, admin: Any) -> Iterator[Callable[..., None]]:
    """permission(entity, role_id): the simulator's user gets that role there, removed after."""
    auth = admin.content.authorizationManager
    given: list[Any] = []

    def give(entity: Any, role_id: int) -> None:
        perm = vim.AuthorizationManager.Permission(
            principal=planted.sim.user, group=False, roleId=role_id, propagate=True
        )
        auth.SetEntityPermissions(entity=entity, permission=[perm])
        given.append(entity)

    yield give
    for entity in given:
        auth.RemoveEntityPermission(entity=entity, user=planted.sim.user, isGroup=False)


def _role(admin: Any, name: str, without: set[str]) -> int:
    """A role with every privilege of Admin but `without` (made once per simulator)."""
    auth = admin.content.authorizationManager
    for role in auth.roleList:
        if role.name == name:
            return int(role.roleId)
    admin = next(role for role in auth.roleList if role.name == "Admin")
    return int(auth.AddAuthorizationRole(name=name, privIds=[p for p in admin.privilege if p not in without]))


def test_the_accounts_privileges_are_checked_where_the_stack_needs_them(
    preflight, planted: Planted, admin: Any, permission: Callable[..., None]
) -> None:
    """Issue 32 item 2: preflight never looked at the account's role; a missing privilege failed
    `pulumi up` halfway (a template copy's snapshot, a datastore the account may not write)."""
    code, lines = preflight(BASE)
    assert code == 0 and any(line.startswith("OK      vsphere:user: account ") for line in lines), "\n".join(lines)

    read_only = next(int(r.roleId) for r in admin.content.authorizationManager.roleList if r.name == "ReadOnly")
    permission(_find(admin, vim.Datastore, "LocalDS_0"), read_only)
    template = _find(admin, vim.VirtualMachine, GPU_TEMPLATE)
    no_snapshot = {"VirtualMachine.State.CreateSnapshot", "VirtualMachine.Config.Rename"}
    permission(template.parent, _role(admin, "pf-no-snapshot", no_snapshot))
    code, lines = preflight(changed(lambda env: env["vcenter"].update(templateReplicas=[{"host": "DC0_C0_H1"}])))

    assert code == 1
    user = planted.sim.user
    assert (
        f"BLOCKER vsphere:user: account {user!r} lacks on the datastore 'LocalDS_0': Datastore.AllocateSpace "
        "(VMs (clone, configure, power, delete), template copies (vcenter.templateReplicas)); grant the role of "
        "docs/deploy.md (vCenter account)"
    ) in lines, "\n".join(lines)
    [folder] = [line for line in lines if "lacks on the GPU template's folder" in line]
    assert "VirtualMachine.Config.Rename (template copies" in folder
    assert "VirtualMachine.State.CreateSnapshot (template copies" in folder
