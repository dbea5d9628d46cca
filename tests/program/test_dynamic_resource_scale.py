"""Hundreds of dynamic resources in one program: the SDK's pickler patching must not pile up.

Without `components.dynamic_resource`, pulumi 3.272's `serialize_provider` nests one more wrapper
around the pickler per dynamic resource and fails with RecursionError after about 480 of them
(three per GPU worker: 160 workers)."""

from __future__ import annotations

import inspect
import pickle
from typing import Any

import pulumi
import pytest
from pulumi.dynamic.dynamic import serialize_provider

from components.dynamic_resource import DynamicResource, sdk_pickler_restored
from components.vsphere.pvrdma_host import PvrdmaHostSettings, PvrdmaHostSettingsProvider
from stacks.tools.plan.mock_runtime import run_program

COUNT = 600  # comfortably past the ~480 where the unguarded SDK overflows the recursion limit


def test_many_dynamic_resources_register_and_leave_the_pickler_as_it_was() -> None:
    before = (pickle._Pickler._batch_setitems, pickle._Pickler.save_dict)  # type: ignore[attr-defined]

    def program() -> None:
        for i in range(COUNT):
            PvrdmaHostSettings(
                f"host-{i}", host_name=f"esxi-{i}", vmknic_device="vmk1", allowed_network="192.168.50.0/24"
            )
        pulumi.export("done", True)

    run = run_program(program, project="vsphere-gpu-cluster", stack="test", config={}, secret_keys=[])

    assert len(run.by_type("pulumi-python:dynamic/vsphere:PvrdmaHostSettings")) == COUNT
    assert (pickle._Pickler._batch_setitems, pickle._Pickler.save_dict) == before  # type: ignore[attr-defined]


def test_the_guard_does_not_change_what_the_sdk_serializes() -> None:
    with sdk_pickler_restored():
        first = serialize_provider(PvrdmaHostSettingsProvider())
    for _ in range(50):
        with sdk_pickler_restored():
            assert serialize_provider(PvrdmaHostSettingsProvider()) == first


def test_serializing_once_gives_each_resource_the_string_the_sdk_would() -> None:
    from components.dynamic_resource import serialize_once
    from components.k8s.api.ready import ApiServerReadyProvider
    from components.vsphere.host_graphics.resource import HostGraphicsModeProvider
    from components.vsphere.vgpu.attachment import VgpuAttachmentProvider

    cached = serialize_once(serialize_provider)
    providers = [
        PvrdmaHostSettingsProvider(),
        HostGraphicsModeProvider(),
        VgpuAttachmentProvider(),
        VgpuAttachmentProvider(power_timeout_minutes=30),  # other settings: its own string
        ApiServerReadyProvider(),
    ]
    for provider in providers * 2:
        with sdk_pickler_restored():
            fresh = serialize_provider(provider)
        with sdk_pickler_restored():
            assert cached(provider) == fresh
    with sdk_pickler_restored():
        assert cached(VgpuAttachmentProvider()) != cached(VgpuAttachmentProvider(power_timeout_minutes=30))


def test_output_annotations_are_for_type_checkers_and_outputs_still_arrive() -> None:
    """The SDK re-reads class annotations on every registration; ours are dropped at runtime
    (finding 7 of BENCHMARKS.md), and the outputs are what the provider returned all the same."""
    assert inspect.get_annotations(PvrdmaHostSettings) == {}
    seen: dict[str, Any] = {}

    def program() -> None:
        settings = PvrdmaHostSettings(
            "host-0", host_name="esxi-0", vmknic_device="vmk1", allowed_network="192.168.50.0/24"
        )
        settings.vmknic_device.apply(lambda device: seen.setdefault("device", device))

    run_program(program, project="vsphere-gpu-cluster", stack="test", config={}, secret_keys=[])
    assert seen == {"device": "vmk1"}


def test_an_output_type_the_sdk_would_convert_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Bad\.count: output type 'pulumi.Output\[int\]' would need conversion"):

        class Bad(DynamicResource, module="test", name="Bad"):
            count: pulumi.Output[int]
