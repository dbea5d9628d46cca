"""Copies of the GPU template as the program registers them (`vcenter.templateReplicas`): none on the
4-worker dev stack, a copy every 15 hosts at 32 workers, each worker cloning its nearest copy, and a
worker's rollout generation following its copy."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from benchmarks.stackgen import BASE_STACK_FILE, scaled_document
from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView
from stacks.tools.plan.mock_runtime import ProgramRun, RecordedResource
from tests.program.conftest import run_view

VM = "vsphere:index/virtualMachine:VirtualMachine"
REPLICA = "gpucluster:vsphere:TemplateReplica"
GATE = "gpucluster:kubernetes:RolloutGate"


def _run(workers: int, edit: Any = None) -> ProgramRun:
    document = scaled_document(yaml.safe_load(BASE_STACK_FILE.read_text()), workers)
    if edit is not None:
        edit(document["config"][ENVIRONMENT_KEY])
    return run_view(ConfigView(values=copy.deepcopy(document["config"]), secret_keys=frozenset()), f"w{workers}")


def _workers(run: ProgramRun) -> dict[str, RecordedResource]:
    parent = run.named("gpu-workers").urn
    return {r.name.removeprefix("gpu-workers-"): r for r in run.by_type(VM) if r.parent == parent}


def test_the_dev_stack_keeps_no_copies(dev_run: ProgramRun) -> None:
    assert dev_run.by_type(REPLICA) == []


def test_32_workers_get_three_copies_and_each_worker_clones_its_nearest() -> None:
    run = _run(32)
    copies = {r.plain_inputs()["host_name"]: r for r in run.by_type(REPLICA)}
    assert sorted(copies) == ["esxi-01.lab.example.com", "esxi-16.lab.example.com", "esxi-31.lab.example.com"]
    for r in copies.values():
        inputs = r.plain_inputs()
        assert inputs["linked"] is True and inputs["snapshot_name"] == "base"
        assert inputs["source_name"] == "rocky9-k8s-vgpu-t4-16c"
        assert r.parent == run.named("gpu-template-copies").urn
    uuid_of = {host: run_uuid for host, run_uuid in ((h, _replica_uuid(r)) for h, r in copies.items())}
    workers = _workers(run)
    expected = {1: "esxi-01", 15: "esxi-01", 16: "esxi-16", 30: "esxi-16", 31: "esxi-31", 32: "esxi-31"}
    for index, host in expected.items():
        vm = workers[f"worker-{index}"]
        assert vm.plain_inputs()["clone"]["templateUuid"] == uuid_of[f"{host}.lab.example.com"]
        assert any(dep == copies[f"{host}.lab.example.com"].urn for dep in vm.dependencies)


def test_templateReplicas_empty_turns_them_off() -> None:
    run = _run(32, lambda env: env["vcenter"].__setitem__("templateReplicas", []))
    assert run.by_type(REPLICA) == []


def test_a_workers_rollout_generation_follows_its_copy() -> None:
    gens = {r.name.removeprefix("rollout-gate-"): r.plain_inputs().get("generation") for r in _run(32).by_type(GATE)}
    assert gens, "no rollout gates"
    assert gens["worker-1"] == gens["worker-15"] != gens["worker-16"] == gens["worker-30"]


def _replica_uuid(resource: RecordedResource) -> str:
    from stacks.tools.plan.mock_values import fake_outputs

    return str(fake_outputs(REPLICA, resource.name, resource.plain_inputs())["uuid"])


def test_a_stack_that_names_no_copies_gets_none(prod_run: ProgramRun) -> None:
    """Copies change every worker's clone source and rollout generation: a stack that was deployed
    before they existed (prod: 16 full clones, past the 7 one source serves at once) must not roll
    every worker on its next `pulumi up` because the program learned to make them."""
    assert prod_run.by_type(REPLICA) == []


def test_auto_derives_the_copies_from_the_workers() -> None:
    run = _run(32, lambda env: env["vcenter"].__setitem__("templateReplicas", "auto"))
    hosts = sorted(r.plain_inputs()["host_name"] for r in run.by_type(REPLICA))
    assert hosts == ["esxi-01.lab.example.com", "esxi-16.lab.example.com", "esxi-31.lab.example.com"]


def test_every_copy_carries_the_stacks_name() -> None:
    """Issue 32 item 1: two stacks with the same template and host made copies of one name."""
    run = _run(32)  # the stack `w32`
    copies = run.by_type(REPLICA)
    assert copies and {r.plain_inputs()["stack"] for r in copies} == {"w32"}


def test_past_seven_copies_a_copy_clones_an_earlier_copy_not_the_template() -> None:
    """128 workers keep 9 copies: the template's host makes 7 (with the control plane's clone, its
    8 documented units), the 8th and 9th clone the 1st and 2nd copy and wait for them."""
    run = _run(128)
    copies = run.by_type(REPLICA)
    assert len(copies) == 9
    by_host = {r.plain_inputs()["host_name"].split(".")[0]: r for r in copies}
    hosts = sorted(by_host, key=lambda host: int(host.rsplit("-", 1)[1]))  # the stack's host order
    template_uuid = {r.plain_inputs()["source_uuid"] for r in (by_host[h] for h in hosts[:7])}
    assert len(template_uuid) == 1 and {by_host[h].plain_inputs()["source_name"] for h in hosts[:7]} == {
        "rocky9-k8s-vgpu-t4-16c"
    }
    for child, parent in ((hosts[7], hosts[0]), (hosts[8], hosts[1])):
        inputs = by_host[child].plain_inputs()
        assert inputs["source_uuid"] == _replica_uuid(by_host[parent]) != next(iter(template_uuid))
        assert inputs["source_name"] == f"rocky9-k8s-vgpu-t4-16c-{parent}"
        assert by_host[parent].urn in by_host[child].dependencies
