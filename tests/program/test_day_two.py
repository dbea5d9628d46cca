"""Day two: each change a team makes to a running stack, planned before and after.

Each scenario plans dev and an edited dev with the real program under the mock runtime and asserts
what `plan --against` tells the user, the resources and their ordering. Pulumi deletes a resource's
dependents before the resource itself, so a guard that depends on a VM runs its delete first.
"""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.vsphere.node_pool import ROLLED_PROPERTIES
from stacks.environment.day_two.check import day_two_report
from stacks.environment.model import Environment
from stacks.tools.plan.diff import NODE_DRAIN, ROLLOUT_GATE, VM, diff_plans
from stacks.tools.plan.mock_runtime import ProgramRun, contains_secret
from stacks.tools.plan.upgrade_notes import upgrade_notes
from tests.program.conftest import ROOT, EnvEdit
from tests.stack_fixtures import fixture_stack

WORKERS = [f"gpu-workers-worker-{i}" for i in range(1, 5)]
CP_MEMBER = "gpucluster:kubernetes:ControlPlaneMember"


def verdicts(before: ProgramRun, after: ProgramRun) -> dict[str, str]:
    return {change.node: change.verdict for change in diff_plans(before.resources, after.resources).nodes}


def drop_last_worker_and_host(env: dict[str, Any]) -> None:
    env["gpuWorkers"]["nodes"].pop()
    env["hosts"].pop()


def add_worker_and_host(env: dict[str, Any]) -> None:
    env["hosts"].append({"name": "esxi-05.lab.example.com", "rdmaVmnics": ["vmnic4"], "vmknicIp": "192.168.0.28"})
    env["gpuWorkers"]["nodes"].append(
        {"name": "worker-5", "managementIp": "10.10.0.55", "rdmaIp": "192.168.0.55", "host": "esxi-05.lab.example.com"}
    )


def test_every_gpu_worker_has_a_drain_guard_on_its_own_vm(dev_run: ProgramRun) -> None:
    ready = dev_run.named("api-server-ready").urn
    for i in range(1, 5):
        guard = dev_run.named(f"drain-worker-{i}")
        vm = dev_run.named(f"gpu-workers-worker-{i}").urn
        others = {dev_run.named(name).urn for name in WORKERS} - {vm}
        assert vm in guard.dependencies and ready in guard.dependencies
        assert not others & set(guard.dependencies)  # one guard per node, no false serialisation
        assert contains_secret(guard.inputs["kubeconfig"])
        assert guard.inputs["timeout_seconds"] == 15 * 60


def test_scale_in_drains_the_removed_worker_and_touches_no_other(
    dev_run: ProgramRun, run_edited: Callable[[EnvEdit], ProgramRun]
) -> None:
    after = run_edited(drop_last_worker_and_host)
    diff = diff_plans(dev_run.resources, after.resources)
    by_node = {c.node: c for c in diff.nodes}
    assert by_node["gpu-workers-worker-4"].verdict == "removed"
    assert by_node["gpu-workers-worker-4"].reasons == ["drained and removed from the cluster first"]
    assert {n: c.verdict for n, c in by_node.items() if n != "gpu-workers-worker-4"} == dict.fromkeys(
        ["control-plane-master", *WORKERS[:3]], "unchanged"
    )
    assert diff.down_at_once == 1
    gone = {r.urn for r in dev_run.resources} - {r.urn for r in after.resources}
    assert dev_run.named("drain-worker-4").urn in gone  # deleted first: it depends on the VM


def test_scale_out_adds_the_host_and_worker_and_leaves_the_rest(
    dev_run: ProgramRun, run_edited: Callable[[EnvEdit], ProgramRun]
) -> None:
    after = run_edited(add_worker_and_host)
    assert verdicts(dev_run, after) == {
        **dict.fromkeys(["control-plane-master", *WORKERS], "unchanged"),
        "gpu-workers-worker-5": "added",
    }
    before_urns = {r.urn: r for r in dev_run.resources}
    changed = [r.name for r in after.resources if r.urn in before_urns and r.inputs != before_urns[r.urn].inputs]
    # Only the switch's membership list knows about every host; nothing per node changes.
    assert all(not name.startswith(("gpu-workers-worker-", "drain-", "control-plane-")) for name in changed), changed
    assert after.named("drain-worker-5").type == NODE_DRAIN


def test_a_template_change_replaces_every_node_and_says_so(
    dev_run: ProgramRun, run_edited: Callable[[EnvEdit], ProgramRun]
) -> None:
    after = run_edited(lambda env: env["vcenter"].update(template="rocky9-k8s-gpu-template-v2"))
    diff = diff_plans(dev_run.resources, after.resources)
    replaced = {c.node for c in diff.nodes if c.verdict == "replaced"}
    assert "control-plane-master" in replaced
    assert all("clone.templateUuid changed" in c.reasons[0] for c in diff.nodes if c.verdict == "replaced")
    # A replaced worker's guard is replaced with it (its VM id changes), so the old node is drained
    # before the old VM is deleted (VMs are replaced delete-first).
    for node in replaced & set(WORKERS):
        number = node.rsplit("-", 1)[1]
        assert dev_run.named(node).urn in dev_run.named(f"drain-worker-{number}").dependencies


def test_a_linked_clone_switch_replaces_every_node_at_once(
    dev_run: ProgramRun, run_edited: Callable[[EnvEdit], ProgramRun]
) -> None:
    after = run_edited(lambda env: env["vm"].update(linkedClone=False))
    diff = diff_plans(dev_run.resources, after.resources)
    assert {c.node: c.verdict for c in diff.nodes} == dict.fromkeys(["control-plane-master", *WORKERS], "replaced")
    assert all("clone.linkedClone" in c.reasons[0] for c in diff.nodes)
    # The rolling-update gates order the replacements: the control plane, then worker by worker.
    assert diff.down_at_once == 1
    reasons = {c.node: c.reasons[-1] for c in diff.nodes}
    rolled = "rolled: its generation changed, so a new VM with fresh first-boot data, drained first"
    assert reasons["control-plane-master"] == rolled
    assert reasons["gpu-workers-worker-1"] == f"{rolled}, once master is back"
    assert reasons["gpu-workers-worker-4"] == f"{rolled}, once worker-3 is back"


def gate_of(run: ProgramRun, node: str) -> dict[str, Any]:
    return dict(run.named(f"rollout-gate-{node}").inputs)


def vm_of(run: ProgramRun, node: str) -> Any:
    return run.named(f"{'control-plane' if node == 'master' else 'gpu-workers'}-{node}")


NODES = ["master", "worker-1", "worker-2", "worker-3", "worker-4"]


def test_each_vm_carries_its_gate_and_day_one_waits_for_nothing(dev_run: ProgramRun) -> None:
    """A VM's template id depends on its own gate (the gate's replacement replaces it); gates depend
    on nothing of the VMs, and on day one (nothing pending) on no settle: VMs clone in parallel."""
    vms = {r.urn for r in dev_run.by_type(VM)}
    settles = {r.urn for r in dev_run.resources if r.type.endswith(":RolloutSettle")}
    assert len(vms) == len(settles) == 5
    for node in NODES:
        vm, gate = vm_of(dev_run, node), dev_run.named(f"rollout-gate-{node}")
        assert [d for d in vm.dependencies if ":Rollout" in d] == [gate.urn]
        # Through a ForceNew property, empty as if unset: the gate's delete-first replacement makes the
        # engine diff it unknown, so the VM goes before the gate and comes back with current inputs.
        assert vm.inputs["datastorePath"] == "" and vm.property_dependencies["datastorePath"] == [gate.urn]
        # Only the gate replaces or restarts it: a change the generation does not see (the first run
        # with gates, a template changed in place) leaves it alone instead of hitting every VM at once.
        assert set(ROLLED_PROPERTIES) <= set(vm.ignore_changes)
        assert gate.delete_before_replace is True
        assert not set(gate.dependencies) & (vms | settles), node
        assert [d for d in gate.dependencies if ":Rollout" in d] == [dev_run.named(f"rollout-gen-{node}").urn]
        settle = dev_run.named(f"rollout-settle-{node}")
        assert vm.urn in settle.dependencies
        assert settle.inputs["gpus"] == (0 if node == "master" else 1)
        assert settle.inputs["control_plane"] is (node == "master")
        assert contains_secret(settle.inputs["kubeconfig"])
        assert contains_secret(dev_run.named(f"rollout-gen-{node}").inputs["kubeconfig"])
    # Nor does any settle wait for another: nothing is pending.
    for previous, node in itertools.pairwise(NODES):
        assert (
            dev_run.named(f"rollout-settle-{previous}").urn not in dev_run.named(f"rollout-settle-{node}").dependencies
        )
        assert gate_of(dev_run, node)["previous_node"] == previous


def test_while_a_change_is_pending_each_gate_waits_for_the_previous_nodes_settle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine resolves a gate's dependency once its generation's `pending` is known; played here
    by mock outputs saying `pending` (what the provider's update returns until the node carries its
    generation's label): every gate then depends on the previous node's settle, which depends on
    that node's VM, so the VMs are replaced strictly one after another."""
    from stacks.tools.plan import mock_runtime
    from tests.program.conftest import run_view, stack_view

    real = mock_runtime.fake_outputs

    def pending(type_token: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        outputs = real(type_token, name, inputs)
        return {**outputs, "pending": True} if type_token.endswith(":RolloutGeneration") else outputs

    monkeypatch.setattr(mock_runtime, "fake_outputs", pending)
    run = run_view(stack_view("dev"), "dev")
    for previous, node in itertools.pairwise(NODES):
        settle = run.named(f"rollout-settle-{previous}")
        assert settle.urn in run.named(f"rollout-gate-{node}").dependencies, node
        # and through the settles too: a node added in the middle (nothing pending of its own)
        # still makes the next one wait for the node before it
        assert settle.urn in run.named(f"rollout-settle-{node}").dependencies, node
        assert vm_of(run, previous).urn in settle.dependencies
    first = run.named("rollout-gate-master")
    assert [d for d in first.dependencies if ":Rollout" in d] == [run.named("rollout-gen-master").urn]


def test_a_memory_change_replaces_the_workers_one_at_a_time(
    dev_run: ProgramRun, run_edited: Callable[[EnvEdit], ProgramRun]
) -> None:
    after = run_edited(lambda env: env["gpuWorkers"].update(memoryMb=49152))
    diff = diff_plans(dev_run.resources, after.resources)
    assert {c.node: c.verdict for c in diff.nodes} == {
        "control-plane-master": "unchanged",
        **dict.fromkeys(WORKERS, "replaced"),
    }
    assert diff.down_at_once == 1
    assert gate_of(dev_run, "master") == gate_of(after, "master")
    # worker-1's predecessor (master) is not changing: its gate does not wait.
    assert next(c for c in diff.nodes if c.node == WORKERS[0]).reasons[-1].endswith("drained first")


def test_a_kubernetes_minor_upgrade_on_one_control_plane_node_rolls_it_first_and_is_refused_unstated(
    dev_run: ProgramRun, run_edited: Callable[[EnvEdit], ProgramRun], dev_env: Environment
) -> None:
    """Dev's single control-plane node: its replacement starts a new cluster, so the upgrade is a
    rebuild there, refused unless stated (staging's three: tests/program/test_kubernetes_upgrade.py)."""
    after = run_edited(lambda env: env["kubernetes"].update(version="1.35.0"))
    edited = dev_env.model_copy(update={"kubernetes": dev_env.kubernetes.model_copy(update={"version": "1.35.0"})})
    diff = diff_plans(dev_run.resources, after.resources, upgrade_notes(dev_env, edited))
    assert {c.verdict for c in diff.nodes} == {"replaced"}
    assert diff.rolled_after["gpu-workers-worker-1"] == "control-plane-master"  # the control plane first
    master = next(c for c in diff.nodes if c.node == "control-plane-master")
    assert (
        master.reasons[-1]
        == "rolled: its Kubernetes version changed, so a new VM with fresh first-boot data, drained first"
    )
    assert all(gate_of(dev_run, n)["generation"] == gate_of(after, n)["generation"] for n in NODES)
    assert diff.down_at_once == 1
    assert any("a single control-plane node (master) cannot be upgraded by replacement" in n for n in diff.notes)
    [change] = day_two_report(dev_env, edited).changes
    assert change.key == "kubernetes.version" and change.refused
    assert not day_two_report(dev_env, edited, ["kubernetes.version"]).refused


def test_a_vgpu_profile_change_replaces_the_workers_one_at_a_time(
    dev_run: ProgramRun, run_edited: Callable[[EnvEdit], ProgramRun]
) -> None:
    """A new VM gets its vGPU from the template at its first power-on (the template must carry the
    new profile: preflight checks it)."""
    after = run_edited(lambda env: env["gpuWorkers"].update(vgpuProfiles=["grid_t4-8c"]))
    diff = diff_plans(dev_run.resources, after.resources)
    found = {c.node: c.verdict for c in diff.nodes}
    assert found == {"control-plane-master": "unchanged", **dict.fromkeys(WORKERS, "replaced")}
    assert diff.down_at_once == 1
    for i in range(2, 5):
        gate = gate_of(after, f"worker-{i}")
        assert gate["previous_node"] == f"worker-{i - 1}"
        assert gate["generation"] != gate_of(dev_run, f"worker-{i}")["generation"]


def test_a_template_rebuilt_under_the_same_name_rolls_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Packer's usual flow: the same name, a new VM id; pulumi-vsphere replaces every VM on it, so
    the generation must change with it (else all at once, with the old first-boot data)."""
    from stacks.tools.plan import mock_runtime
    from tests.program.conftest import run_view, stack_view

    before = run_view(stack_view("dev"), "dev")
    real = mock_runtime.fake_invoke_result

    def rebuilt(token: str, args: dict[str, Any]) -> dict[str, Any]:
        result = real(token, args)
        return {**result, "id": f"{result['id']}-rebuilt"} if token.endswith("getVirtualMachine") else result

    monkeypatch.setattr(mock_runtime, "fake_invoke_result", rebuilt)
    after = run_view(stack_view("dev"), "dev")
    assert all(gate_of(before, n)["generation"] != gate_of(after, n)["generation"] for n in NODES)
    assert diff_plans(before.resources, after.resources).down_at_once == 1


def test_plan_against_prints_the_verdicts(tmp_path: Path) -> None:
    document = yaml.safe_load((fixture_stack("dev")).read_text())
    drop_last_worker_and_host(document["config"]["vsphere-gpu-cluster:environment"])
    # Kept apart from the edited file, as the docs advise: stack files side by side are checked
    # against each other for collisions, and these two are the same environment.
    (tmp_path / "deployed").mkdir()
    old = tmp_path / "deployed" / "Pulumi.dev.yaml"
    old.write_text((fixture_stack("dev")).read_text())
    new = tmp_path / "Pulumi.dev.after.yaml"
    new.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "stacks",
            "plan",
            "dev",
            "--file",
            str(new),
            "--out",
            str(tmp_path / "out"),
            "--against",
            str(old),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    assert f"against {old}:" in result.stdout
    assert "gpu-workers-worker-4  removed: drained and removed from the cluster first" in result.stdout
    assert "worst case: 1 node(s) down at once" in result.stdout


def test_plan_against_refuses_a_pod_cidr_change_and_names_the_flag(tmp_path: Path) -> None:
    document = yaml.safe_load((fixture_stack("dev")).read_text())
    document["config"]["vsphere-gpu-cluster:environment"]["kubernetes"]["podCidr"] = "10.32.0.0/16"
    (tmp_path / "deployed").mkdir()  # apart from the edited file: side by side they would collide
    old = tmp_path / "deployed" / "Pulumi.dev.yaml"
    old.write_text((fixture_stack("dev")).read_text())
    new = tmp_path / "Pulumi.dev.after.yaml"
    new.write_text(yaml.safe_dump(document, sort_keys=False))

    def plan(*more: str) -> subprocess.CompletedProcess[str]:
        args = ["plan", "dev", "--file", str(new), "--out", str(tmp_path / "out"), "--against", str(old), *more]
        return subprocess.run(
            [sys.executable, "-m", "stacks", *args], cwd=ROOT, capture_output=True, text=True, timeout=240
        )

    refused = plan()
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "kubernetes.podCidr 10.244.0.0/16 -> 10.32.0.0/16" in refused.stdout
    assert "--accept-rebuild kubernetes.podCidr" in refused.stderr
    typo = plan("--accept-rebuild", "kubernetes.podCIDR")
    assert typo.returncode == 2 and "--accept-rebuild kubernetes.podCIDR" in typo.stderr
    assert "kubernetes.podCidr" in typo.stderr  # names the key that is refused, to fix the typo


def test_readiness_waits_for_the_init_nodes_vm_alone() -> None:
    """Staging's three control-plane nodes: the wait starts once cp-1 (which runs `kubeadm init`)
    exists, not after cp-2, cp-3 and the pool's DRS rule (issue 19: nothing avoidable on the path)."""
    from tests.program.conftest import run_view, stack_view

    staging = run_view(stack_view("staging"), "staging")
    ready = staging.named("api-server-ready")
    pool = {r.urn: r for r in staging.resources if r.name.startswith("control-plane-")}
    waited = {pool[urn].name for urn in ready.dependencies if urn in pool}
    assert waited == {"control-plane-cp-1"}


def test_whatever_talks_to_the_cluster_goes_before_any_control_plane_vm() -> None:
    """`pulumi destroy` deletes dependents first: the drains, the join token and the cluster's
    providers (hence every Kubernetes object) must depend on every control-plane VM, or cp-2 and
    cp-3 could go first and take etcd's quorum with them while the drains still need the API."""
    from tests.program.conftest import run_view, stack_view

    staging = run_view(stack_view("staging"), "staging")
    control_plane = {
        r.urn
        for r in staging.resources
        if r.type == "vsphere:index/virtualMachine:VirtualMachine" and r.name.startswith("control-plane-")
    }
    assert len(control_plane) == 3
    talkers = [r for r in staging.resources if r.type in (NODE_DRAIN, CP_MEMBER, "pulumi:providers:kubernetes")]
    # A guard per worker and per control-plane node, three providers (the cluster's, the join
    # token's and the control-plane join's).
    assert len(talkers) == 8 + 3 + 3
    for resource in talkers:
        if resource.name in ("join-token-provider", "control-plane-join-provider"):
            continue  # below
        assert control_plane <= set(resource.dependencies), resource.name
    # The join token's Secret is the exception: a control-plane member replaced in a rolling change
    # joins with this run's token, so it is applied once the API is ready (not after every member),
    # and on destroy it goes with the first member's VM, without an API call.
    token_provider, secret = staging.named("join-token-provider"), staging.named("join-token-secret")
    first = staging.named("control-plane-cp-1").urn
    assert staging.named("api-server-ready").urn in token_provider.dependencies
    assert not (control_plane - {first}) & set(token_provider.dependencies)
    assert secret.deleted_with == first
    # So are the joining control-plane nodes' Secrets and their RBAC (issue 40 item 5): the same
    # wait, the same lifetime, for the same reason.
    cp_join_provider = staging.named("control-plane-join-provider")
    assert staging.named("api-server-ready").urn in cp_join_provider.dependencies
    assert not (control_plane - {first}) & set(cp_join_provider.dependencies)
    applied = [r for r in staging.resources if r.provider and r.provider.startswith(cp_join_provider.urn)]
    assert len(applied) == 5  # the token, kubeadm-certs, the sealed encryption config, Role, RoleBinding
    assert {r.deleted_with for r in applied} == {first}


def test_replacing_the_init_node_says_the_cluster_starts_over(
    dev_run: ProgramRun, run_edited: Callable[[EnvEdit], ProgramRun]
) -> None:
    after = run_edited(lambda env: env["vcenter"].update(template="rocky9-k8s-template-v2"))
    diff = diff_plans(dev_run.resources, after.resources)
    assert any("runs `kubeadm init`" in note and "empty etcd" in note for note in diff.notes), diff.notes


def test_a_template_change_rolls_three_control_plane_nodes_the_init_node_first() -> None:
    """Staging: cp-1 (which ran `kubeadm init`; the readiness check and the join token's Secret wait
    for its VM) first, then cp-2 and cp-3, then the workers; each control-plane settle waits for
    kubeadm's control-plane label (its etcd member joined)."""
    from tests.program.conftest import edited_view, run_view, stack_view

    before = run_view(stack_view("staging"), "staging")
    after = run_view(
        edited_view("staging", lambda env: env["vcenter"].update(template="rocky9-k8s-template-v2")), "staging"
    )
    chain = [
        (g.inputs["previous_node"], g.inputs["node_name"])
        for g in after.by_type(ROLLOUT_GATE)
        if g.inputs["node_name"].startswith("cp-")
    ]
    assert sorted(chain) == sorted([("", "cp-1"), ("cp-1", "cp-2"), ("cp-2", "cp-3")])
    assert after.named("rollout-gate-worker-1").inputs["previous_node"] == "cp-3"
    for node in ("cp-1", "cp-2", "cp-3"):
        assert after.named(f"rollout-settle-{node}").inputs["control_plane"] is True
        # Its etcd member is removed before its VM goes: the guard depends on the VM through its id
        # (replaced with it, delete-first), and asks the other two members.
        guard = after.named(f"member-{node}")
        assert guard.type == CP_MEMBER and after.named(f"control-plane-{node}").urn in guard.dependencies
        assert len(guard.inputs["other_addresses"]) == 2 and contains_secret(guard.inputs["etcd_client_key_pem"])
    diff = diff_plans(before.resources, after.resources)
    replaced = {c.node for c in diff.nodes if c.verdict == "replaced"}
    assert {"control-plane-cp-1", "control-plane-cp-2", "control-plane-cp-3"} <= replaced
    assert diff.down_at_once == 1
    assert any(
        "cp-1 ran `kubeadm init`; it is replaced first" in n and "joins the other members" in n for n in diff.notes
    )
    assert not any("empty etcd" in n for n in diff.notes)


def test_removing_control_plane_nodes_says_their_etcd_members_go_first() -> None:
    """Staging from three control-plane nodes to one: each removed node's guard (depending on its
    VM) drains it and removes its etcd member before the VM goes."""
    from tests.program.conftest import edited_view, run_view, stack_view

    def keep_one(env: dict[str, Any]) -> None:
        del env["controlPlane"]["nodes"][1:]
        env["kubernetes"].pop("controlPlaneEndpoint", None)

    before = run_view(stack_view("staging"), "staging")
    after = run_view(edited_view("staging", keep_one), "staging")
    by_node = {c.node: c for c in diff_plans(before.resources, after.resources).nodes}
    for node in ("control-plane-cp-2", "control-plane-cp-3"):
        assert by_node[node].verdict == "removed"
        assert "etcd member removed (quorum checked) first" in by_node[node].reasons[0]
        assert before.named(node).urn in before.named(f"member-{node.removeprefix('control-plane-')}").dependencies


def test_an_existing_cluster_gets_no_rollout_and_its_vms_replace_as_before() -> None:
    """`kubernetes.mode: existing`: the stack does not join new VMs (no first-boot data), so a node it
    replaced could never come back; no gate, no settle, and nothing of the VMs is ignored."""
    from stacks.environment.loader import KUBECONFIG_KEY, ConfigView
    from tests.program.conftest import edited_view, run_view

    view = edited_view("dev", lambda env: env["kubernetes"].update(mode="existing"))
    run = run_view(ConfigView(values=view.values, secret_keys=view.secret_keys | {KUBECONFIG_KEY}), "dev")
    assert not [r for r in run.resources if ":Rollout" in r.type]
    for vm in run.by_type(VM):
        assert "datastorePath" not in vm.inputs and not set(ROLLED_PROPERTIES) & set(vm.ignore_changes)


def test_a_template_changed_in_place_changes_no_vm_and_plan_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Converted to a VM, given a newer guest OS id, converted back: the same id, so the same
    generation. A gated VM ignores what the template gives, so no VM restarts (all at once, which
    pulumi-vsphere would do); a node replaced later takes it."""
    from stacks.tools.plan import mock_runtime
    from tests.program.conftest import run_view, stack_view

    before = run_view(stack_view("dev"), "dev")
    real = mock_runtime.fake_invoke_result

    def edited(token: str, args: dict[str, Any]) -> dict[str, Any]:
        result = real(token, args)
        return {**result, "guestId": "rhel10_64Guest"} if token.endswith("getVirtualMachine") else result

    monkeypatch.setattr(mock_runtime, "fake_invoke_result", edited)
    after = run_view(stack_view("dev"), "dev")
    diff = diff_plans(before.resources, after.resources)
    assert {c.verdict for c in diff.nodes} == {"unchanged"} and diff.down_at_once == 0
    assert all(c.reasons == ["guestId changed: only a new VM takes it (its rolling-update gate)"] for c in diff.nodes)


def test_a_preview_with_new_gates_shows_no_vm_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first preview after the gates arrive (or any preview of a new node): a new gate's id is
    unknown there. A VM property derived from that id would be unknown too, and an unknown ForceNew
    property reads as a replacement: every VM listed as replaced, and a protected one (prod) failing
    the preview. The VM's `datastorePath` must be known, "" , while still recording the gate."""
    from stacks.environment.loader import PROJECT, config_for_runtime
    from stacks.tools.plan import mock_runtime
    from stacks.tools.plan.mock_runtime import run_program, run_project_main
    from tests.program.conftest import stack_view

    real = mock_runtime.fake_resource_id

    def new_gates(type_token: str, name: str, inputs: dict[str, Any]) -> str:
        return "" if type_token.endswith(":RolloutGate") else real(type_token, name, inputs)

    monkeypatch.setattr(mock_runtime, "fake_resource_id", new_gates)
    config, secret_keys = config_for_runtime(stack_view("dev"), "test-placeholder-secret")
    monkeypatch.setenv("PULUMI_ERROR_OUTPUT_STRING", "true")
    run = run_program(run_project_main(ROOT), project=PROJECT, stack="dev", config=config,
                      secret_keys=secret_keys, preview=True)  # fmt: skip
    for node in NODES:
        vm = vm_of(run, node)
        assert vm.inputs["datastorePath"] == "", node
        assert vm.property_dependencies["datastorePath"] == [run.named(f"rollout-gate-{node}").urn]


def test_a_template_with_a_bigger_disk_waits_for_the_rollout_on_linked_clones(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linked clones (dev) take the template's disk size. A template rebuilt in place with another disk
    must not grow every VM at once (nor fail the diff: terraform-provider-vsphere refuses a smaller
    disk, "virtual disks cannot be shrunk"); the disk is the template's, so only a new VM takes it."""
    from stacks.tools.plan import mock_runtime
    from tests.program.conftest import run_view, stack_view

    before = run_view(stack_view("dev"), "dev")
    real = mock_runtime.fake_invoke_result

    def bigger_disk(token: str, args: dict[str, Any]) -> dict[str, Any]:
        result = real(token, args)
        if not token.endswith("getVirtualMachine"):
            return result
        return {**result, "disks": [{**result["disks"][0], "size": 60}]}

    monkeypatch.setattr(mock_runtime, "fake_invoke_result", bigger_disk)
    after = run_view(stack_view("dev"), "dev")
    assert vm_of(after, "worker-1").inputs["disks"][0]["size"] == 60  # a new VM would take it
    diff = diff_plans(before.resources, after.resources)
    assert {c.verdict for c in diff.nodes} == {"unchanged"} and diff.down_at_once == 0
    assert all(
        c.reasons == ["disks[0].size changed: only a new VM takes it (its rolling-update gate)"] for c in diff.nodes
    )


def _moved_by_drs(run: ProgramRun, node: str, host_id: str) -> ProgramRun:
    """`run` as `pulumi refresh` leaves it after DRS moved `node`'s VM: pulumi-vsphere reads the VM's
    current host into `host_system_id` (terraform-provider-vsphere, resourceVSphereVirtualMachineRead:
    `d.Set("host_system_id", vprops.Runtime.Host.Value)`)."""
    vm = vm_of(run, node)
    moved = dataclasses.replace(vm, inputs={**vm.inputs, "hostSystemId": host_id})
    return dataclasses.replace(run, resources=[moved if r is vm else r for r in run.resources])


@pytest.mark.parametrize("placement", ["none", "anti-affinity"])
def test_a_drs_move_of_an_unpinned_vm_is_not_undone(
    placement: str, run_edited: Callable[[EnvEdit], ProgramRun]
) -> None:
    """With placement `none`/`anti-affinity`, a node's `host` is only where its clone starts; DRS may
    move it later. Setting the host back would vMotion it on every `up` (and fail for a vGPU VM)."""
    run = run_edited(lambda env: env["gpuWorkers"].update(placement=placement))
    refreshed = _moved_by_drs(run, "worker-1", "host-elsewhere")
    diff = diff_plans(refreshed.resources, run.resources)
    assert {c.node: c.verdict for c in diff.nodes}["gpu-workers-worker-1"] == "unchanged"
    assert "hostSystemId" in vm_of(run, "worker-1").ignore_changes


def test_a_pinned_vm_keeps_its_host_managed(dev_run: ProgramRun) -> None:
    # vm-host-rules (dev): the mandatory rule keeps the VM there; the host stays a managed property.
    assert dev_run.named("gpu-workers-worker-1").inputs["hostSystemId"]
    assert "hostSystemId" not in vm_of(dev_run, "worker-1").ignore_changes
