"""The mock runtime the plan and the tests stand on: runs stay apart and leave nothing behind."""

from __future__ import annotations

import gc
import weakref

import pulumi
import pulumi_vsphere as vsphere
from pulumi.runtime import rpc, settings

from stacks.tools.plan.mock_runtime import run_program


def _run_exporting_a_resource(refs: list[weakref.ref[pulumi.Resource]]) -> None:
    def program() -> None:
        folder = vsphere.Folder("vm-folder", path="gpu/dev", type="vm", datacenter_id="datacenter-1")
        pulumi.export("folder", folder.path)
        root = settings.get_root_resource()
        assert root is not None
        refs.extend([weakref.ref(folder), weakref.ref(root)])

    run_program(program, project="runtime", stack="test", config={}, secret_keys=[])


def test_a_run_leaves_its_stack_and_resources_to_the_collector() -> None:
    """Nothing outlives a run: a long test session or benchmark plans many, and an export keeps
    every resource it mentions, with all their Outputs, alive for as long as its stack is."""
    refs: list[weakref.ref[pulumi.Resource]] = []
    _run_exporting_a_resource(refs)
    gc.collect()
    assert refs and all(ref() is None for ref in refs), [ref() for ref in refs]


def test_exports_are_resolved_in_each_run_of_its_own() -> None:
    def program(value: str) -> None:
        pulumi.export("value", value)

    first = run_program(lambda: program("one"), project="runtime", stack="a", config={}, secret_keys=[])
    second = run_program(lambda: program("two"), project="runtime", stack="b", config={}, secret_keys=[])
    assert first.stack_outputs == {"value": "one"}
    assert second.stack_outputs == {"value": "two"}


def test_a_secret_inside_an_export_is_wrapped_where_it_sits() -> None:
    def program() -> None:
        pulumi.export(
            "node",
            {"name": "worker-1", "token": pulumi.Output.secret("abcdef.0123456789abcdef"), "ports": [6443]},
        )
        pulumi.export("kubeconfig", pulumi.Output.secret("apiVersion: v1"))

    outputs = run_program(program, project="runtime", stack="test", config={}, secret_keys=[]).stack_outputs
    assert outputs["node"]["name"] == "worker-1" and outputs["node"]["ports"] == [6443]
    assert rpc.is_rpc_secret(outputs["node"]["token"])
    assert rpc.unwrap_rpc_secret(outputs["node"]["token"]) == "abcdef.0123456789abcdef"
    assert rpc.is_rpc_secret(outputs["kubeconfig"])
