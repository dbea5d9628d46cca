"""`python -m stacks recover` against the simulator: after a deployment of dev whose checkpoints
were lost, every vSphere object the program makes is found by name and written to the import file
with an id that resolves back to it; an object removed by hand is "not created yet"; another
stack's objects of similar names are left out; no resource type goes unclassified.

The VMs come from tests/components/vsphere/sim_deploy.py (as pulumi-vsphere makes them); the switch, port
group, vmknic, DRS groups and rules and a template copy are made here with pyVmomi under the names
the program registers them with (the mock run's inputs), as pulumi-vsphere would.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyVmomi import vim

from components.vcenter.settings import VcenterConnection
from components.vcenter.tasks import wait_for_task
from components.vsphere.dvs_host_member import reconfigure_member
from components.vsphere.template_copies.plan import copy_prefix
from stacks.cli import main
from stacks.environment.loader import load_environment
from stacks.tools.plan.command import run_plan
from stacks.tools.plan.mock_runtime import ProgramRun
from stacks.tools.recover import kinds
from stacks.tools.recover.command import run_recover
from stacks.tools.recover.recovery import Recovery, import_document, recover
from tests.components.vsphere.conftest import CLUSTER_HOSTS, TEMPLATE_VM, _find
from tests.components.vsphere.sim_deploy import Deployment, deployed, on_the_simulator
from tests.components.vsphere.vm_helpers import clone, destroy, reconfigure, unique, vgpu_device_spec
from tests.program.conftest import edited_view

pytestmark = pytest.mark.vcsim

STACK = "dev"


@pytest.fixture(scope="module")
def templates(si: Any, vcsim: Any) -> Iterator[dict[str, Any]]:
    """The control plane's template and the GPU workers' (as test_vcsim_fresh_deploy.py makes them)."""
    if not vcsim.extended:
        pytest.skip("needs the vcsim harness")
    base = _find(si, vim.VirtualMachine, TEMPLATE_VM)
    plain = clone(base, unique("rocky9-k8s"))
    gpu = clone(base, unique("rocky9-k8s-vgpu-t4-16c"))
    reconfigure(gpu, deviceChange=[vgpu_device_spec("grid_t4-16c")])
    wait_for_task(gpu.UpgradeVM_Task(version="vmx-21"))
    yield {"plain": plain, "gpu": gpu}
    for vm in (plain, gpu):
        destroy(vm)


def _one(run: ProgramRun, type_token: str) -> dict[str, Any]:
    [resource] = run.by_type(type_token)
    return resource.plain_inputs()


def _make_fabric_and_rules(si: Any, run: ProgramRun, deployment: Deployment) -> tuple[Any, tuple[Any, str]]:
    """The switch, its port group, one host's vmknic on it, and every DRS group and rule, under
    the program's names; what to destroy afterwards."""
    datacenter = _find(si, vim.Datacenter, "DC0")
    switch_spec = vim.DistributedVirtualSwitch.CreateSpec(
        configSpec=vim.dvs.VmwareDistributedVirtualSwitch.ConfigSpec(name=_one(run, kinds.SWITCH)["name"])
    )
    dvs = wait_for_task(datacenter.networkFolder.CreateDVS_Task(switch_spec))
    group_name = _one(run, kinds.PORT_GROUP)["name"]
    wait_for_task(
        dvs.AddDVPortgroup_Task([vim.dvs.DistributedVirtualPortgroup.ConfigSpec(name=group_name, type="earlyBinding")])
    )
    port_group = next(pg for pg in dvs.portgroup if pg.name == group_name)
    host = _find(si, vim.HostSystem, CLUSTER_HOSTS[0])
    reconfigure_member(dvs, host, "add", [], host_name=host.name)
    # One host's vmknic only: the other hosts' are "not created yet".
    device = host.configManager.networkSystem.AddVirtualNic(
        portgroup="",
        nic=vim.host.VirtualNic.Specification(
            ip=vim.host.IpConfig(dhcp=False, ipAddress="192.0.2.10", subnetMask="255.255.255.0"),
            distributedVirtualPort=vim.dvs.PortConnection(switchUuid=dvs.uuid, portgroupKey=port_group.key),
        ),
    )
    cluster = _find(si, vim.ClusterComputeResource, "DC0_C0")
    vms = {r.plain_inputs()["name"]: r for r in run.by_type(kinds.VM)}
    by_name = {vm.name: vm for vm in deployment.vms.values()}
    groups: list[vim.cluster.GroupSpec] = []
    for resource in run.by_type(kinds.VM_GROUP):
        name = resource.plain_inputs()["name"]
        members = [by_name[n] for n in vms if name.startswith(n + "-")]
        groups.append(vim.cluster.GroupSpec(operation="add", info=vim.cluster.VmGroup(name=name, vm=members)))
    for resource in run.by_type(kinds.HOST_GROUP):
        info = vim.cluster.HostGroup(name=resource.plain_inputs()["name"], host=[host])
        groups.append(vim.cluster.GroupSpec(operation="add", info=info))
    rules = [
        vim.cluster.RuleSpec(
            operation="add",
            info=vim.cluster.VmHostRuleInfo(
                name=r.plain_inputs()["name"],
                enabled=True,
                mandatory=True,
                vmGroupName=r.plain_inputs()["vmGroupName"],
                affineHostGroupName=r.plain_inputs()["affinityHostGroupName"],
            ),
        )
        for r in run.by_type(kinds.VM_HOST_RULE)
    ]
    spec = vim.cluster.ConfigSpecEx(groupSpec=groups, rulesSpec=rules)
    wait_for_task(cluster.ReconfigureComputeResource_Task(spec=spec, modify=True))
    return dvs, (host, device)


@pytest.fixture(scope="module")
def lost(si: Any, vcsim: Any, templates: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A dev deployment whose checkpoints were lost, and the look-alikes of another stack."""
    template = templates["plain"]
    edit = on_the_simulator(STACK, template=template.name, gpu_template=templates["gpu"].name, hosts=CLUSTER_HOSTS)
    written: dict[str, Any] = {}

    def on_sim(env: dict[str, Any]) -> None:
        edit(env)
        env["vcenter"]["datacenter"] = "DC0"
        env["vcenter"]["computeCluster"] = "DC0_C0"
        env["rdmaNetwork"]["switchName"] = unique("dev-rdma-dvs")
        env["rdmaNetwork"]["portGroupName"] = unique("dev-pvrdma")
        written.update(copy.deepcopy(env))

    with deployed(si, vcsim.config(), STACK, on_sim) as deployment:
        assert deployment.error is None, deployment.error
        made = _make_fabric_and_rules(si, deployment.run, deployment)
        worker = next(iter(deployment.workers().values()))
        # Another stack's look-alikes: a VM of a worker's very name in another folder, and a copy
        # of the template named for another stack; and this stack's own copy.
        other_folder = template.parent.CreateFolder(unique("other-stack"))
        spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=False)
        look_alike = wait_for_task(template.CloneVM_Task(folder=other_folder, name=worker.name, spec=spec))
        ours = clone(template, copy_prefix(template.name, STACK) + "0123abcd")
        theirs = clone(template, copy_prefix(template.name, "devx") + "0123abcd")
        view = edited_view(STACK, lambda env: (env.clear(), env.update(copy.deepcopy(written))))
        try:
            yield {
                "deployment": deployment,
                "view": view,
                "ours": ours,
                "theirs": theirs,
                "look_alike": look_alike,
                "removed": set(),
            }
        finally:
            for vm in (ours, theirs, look_alike):
                destroy(vm)
            wait_for_task(other_folder.Destroy_Task())
            dvs, (host, device) = made
            host.configManager.networkSystem.RemoveVirtualNic(device)
            wait_for_task(dvs.Destroy_Task())


def _recover(si: Any, lost: dict[str, Any]) -> Recovery:
    # The program run as the command runs it (lookups answered by mocks), not the deployment's.
    view = lost["view"]
    return recover(run_plan(view, stack=STACK), load_environment(view), si, stack=STACK)


def _resolves(si: Any, type_token: str, name: str, found_id: str) -> bool:
    """The import id leads back to the object of that name and kind, as the provider's importer reads it."""
    index = si.RetrieveContent().searchIndex
    if type_token in (kinds.VM, kinds.SWITCH, kinds.PORT_GROUP, kinds.FOLDER):
        entity = index.FindByInventoryPath(found_id[1:])
        wanted = {
            kinds.VM: vim.VirtualMachine,
            kinds.SWITCH: vim.DistributedVirtualSwitch,
            kinds.PORT_GROUP: vim.dvs.DistributedVirtualPortgroup,
            kinds.FOLDER: vim.Folder,
        }[type_token]
        return isinstance(entity, wanted) and found_id.endswith("/" + name)
    if type_token == kinds.VNIC:
        host_id, device = found_id.rsplit("_", 1)
        host = vim.HostSystem(host_id, si._stub)
        return any(nic.device == device for nic in host.configManager.networkSystem.networkInfo.vnic)
    key = json.loads(found_id)
    cluster = index.FindByInventoryPath(key["compute_cluster_path"][1:])
    entries = [*cluster.configurationEx.group, *cluster.configurationEx.rule]
    return key["name"] == name and any(e.name == name for e in entries)


def test_every_vsphere_object_of_the_stack_is_in_the_import_file_with_an_id_that_resolves(
    si: Any, lost: dict[str, Any], tmp_path: Path
) -> None:
    run: ProgramRun = lost["deployment"].run
    recovery = _recover(si, lost)
    assert recovery.unclassified == []  # a new resource type must get a rule in kinds.py
    registered = {(r.type, r.name) for r in run.resources if r.type in kinds.IMPORTED}
    not_made = {(kinds.VNIC, r.name) for r in run.by_type(kinds.VNIC) if not r.name.endswith(CLUSTER_HOSTS[0])}
    not_made |= {(kinds.VM, name) for name in lost["removed"]}  # by another test here, in any order
    imported = {(f.resource.type, f.resource.name): f.id for f in recovery.imported}
    assert set(imported) == registered - not_made
    assert {(r.type, r.name) for r in recovery.absent} == not_made
    for type_token in (
        kinds.VM,
        kinds.SWITCH,
        kinds.PORT_GROUP,
        kinds.FOLDER,
        kinds.VM_GROUP,
        kinds.HOST_GROUP,
        kinds.VM_HOST_RULE,
    ):
        assert any(t == type_token for t, _ in imported), type_token
    for (type_token, name), found_id in imported.items():
        inputs = next(r for r in run.resources if (r.type, r.name) == (type_token, name)).plain_inputs()
        assert _resolves(si, type_token, inputs.get("name") or inputs.get("path") or "", found_id), (name, found_id)
    # The workers' VMs are the deployed ones, under the stack's folder, not the look-alike.
    folder = load_environment(lost["view"]).vcenter.folder
    for name, vm in lost["deployment"].vms.items():
        assert imported[(kinds.VM, name)] == f"/DC0/vm/{folder}/{vm.name}"
    # The document: each entry names its type, key and id; parents are components in the file.
    document = import_document(recovery)
    entries = {e["name"]: e for e in document["resources"]}
    for found in recovery.imported:
        entry = entries[found.resource.name]
        assert (entry["type"], entry["id"]) == (found.resource.type, found.id)
        if found.resource.type == kinds.FOLDER:
            assert "parent" not in entry  # the root stack's child
        else:
            parent = entries[entry["parent"]]
            assert parent.get("component") is True and "id" not in parent
    # The project's own resources are named with what `pulumi up` does for them.
    assert recovery.adopted["gpucluster:vsphere:VgpuAttachment"][0] == 4


def test_the_stacks_template_copy_is_reported_and_another_stacks_is_not(si: Any, lost: dict[str, Any]) -> None:
    paths = [c.path for c in _recover(si, lost).template_copies]
    assert [p.rsplit("/", 1)[-1] for p in paths] == [lost["ours"].name]


def test_a_vm_removed_by_hand_is_not_created_yet_and_nothing_else_changes(si: Any, lost: dict[str, Any]) -> None:
    before = _recover(si, lost)
    name, vm = sorted(lost["deployment"].workers().items())[-1]
    destroy(vm)
    del lost["deployment"].vms[name]
    lost["removed"].add(name)
    after = _recover(si, lost)
    assert (kinds.VM, name) in {(r.type, r.name) for r in after.absent}
    assert {f.resource.name for f in before.imported} - {f.resource.name for f in after.imported} == {name}


def test_resources_in_the_state_are_skipped(si: Any, lost: dict[str, Any]) -> None:
    run: ProgramRun = lost["deployment"].run
    switch = run.by_type(kinds.SWITCH)[0]
    recovery = recover(
        run, load_environment(lost["view"]), si, stack=STACK, state_urns=frozenset({switch.urn, switch.parent or ""})
    )
    assert switch in recovery.in_state
    assert switch.name not in {f.resource.name for f in recovery.imported}
    document = import_document(recovery, frozenset({switch.parent or ""}))
    port_group = next(e for e in document["resources"] if e["type"] == kinds.PORT_GROUP)
    assert document["nameTable"][port_group["parent"]] == switch.parent


def test_the_command_writes_the_document_from_a_stack_file(
    si: Any, vcsim: Any, lost: dict[str, Any], tmp_path: Path
) -> None:
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump({"config": dict(lost["view"].values)}), encoding="utf-8")
    out = tmp_path / "import.json"
    code = main(
        [
            "recover",
            STACK,
            "--file",
            str(stack_file),
            "--out",
            str(out),
            "--server",
            f"http://127.0.0.1:{vcsim.port}",
            "--user",
            vcsim.user,
            "--password",
            vcsim.password,
        ]
    )
    assert code == 0
    document = json.loads(out.read_text())
    types = {e["type"] for e in document["resources"] if not e.get("component")}
    assert {kinds.VM, kinds.SWITCH, kinds.PORT_GROUP, kinds.VM_HOST_RULE} <= types


def test_a_type_without_a_rule_stops_the_command(
    si: Any, vcsim: Any, lost: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(kinds.ADOPTED, "VgpuAttachment")
    out = tmp_path / "import.json"
    code = run_recover(lost["view"], VcenterConnection.from_url(vcsim.url), stack=STACK, out=out)
    assert code == 1 and not out.exists()


def test_unknown_types_are_unclassified() -> None:
    assert kinds.classify("vsphere:index/datastoreCluster:DatastoreCluster").name == "UNCLASSIFIED"
    assert kinds.classify("gpucluster:vsphere:SomethingNew").name == "UNCLASSIFIED"
    assert kinds.classify("gpucluster:vsphere:DvsHostMember").name == "ADOPTED"
