"""The replays the scale benchmark compares the program with: what makes them like for like."""

from __future__ import annotations

import pulumi
import pulumi_vsphere as vsphere

from benchmarks.baseline import recorded_shape, replay_program, typed_class
from stacks.tools.plan.mock_runtime import ProgramRun, run_program


def _run(program: object) -> ProgramRun:
    return run_program(program, project="bench", stack="test", config={}, secret_keys=[])  # type: ignore[arg-type]


def _folder_program() -> None:
    vsphere.Folder("vm-folder", path="gpu/dev", type="vm", datacenter_id="datacenter-1")


def test_a_resource_built_straight_from_the_sdk_class_carries_no_source_position() -> None:
    """Why the bare replay builds through thin subclasses: otherwise its registrations lack what
    every real program's carry (and the engine stores), and it skips the work of computing it."""
    typed = _run(_folder_program).resources[0]
    straight = _run(lambda: pulumi.CustomResource(typed.type, "vm-folder", dict(typed.inputs))).resources[0]
    assert typed.source_position is not None
    assert straight.source_position is None
    assert recorded_shape([straight]) != recorded_shape([typed])


def test_both_replays_register_what_the_typed_class_did() -> None:
    original = _run(_folder_program).resources
    assert original[0].version  # typed classes ask for their provider's plugin version
    for typed in (False, True):
        replayed = _run(replay_program(original, typed=typed)).resources
        assert recorded_shape(replayed) == recorded_shape(original), f"typed={typed}"


def test_typed_replay_finds_provider_index_classes_only() -> None:
    found = typed_class("vsphere:index/virtualMachine:VirtualMachine")
    assert found is not None and found.cls is vsphere.VirtualMachine
    assert found.python_names["datastoreId"] == "datastore_id"
    assert typed_class("gpucluster:vsphere:VgpuAttachment") is None
    assert typed_class("kubernetes:yaml/v2:ConfigGroup") is None
    assert typed_class("nosuchpackage:index/thing:Thing") is None
