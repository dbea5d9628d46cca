"""Hundreds of dynamic resources in one program: the SDK's pickler patching must not pile up.

Without `components.dynamic_resource`, pulumi 3.272's `serialize_provider` nests one more wrapper
around the pickler per dynamic resource and fails with RecursionError after about 480 of them
(three per GPU worker: 160 workers)."""

from __future__ import annotations

import pickle

import pulumi
from pulumi.dynamic.dynamic import serialize_provider

from components.dynamic_resource import sdk_pickler_restored
from components.vsphere.pvrdma_host import PvrdmaHostSettings, PvrdmaHostSettingsProvider
from stacks.mock_runtime import run_program

COUNT = 600  # comfortably past the ~480 where the unguarded SDK overflows the recursion limit


def test_many_dynamic_resources_register_and_leave_the_pickler_as_it_was() -> None:
    before = (pickle._Pickler._batch_setitems, pickle._Pickler.save_dict)  # type: ignore[attr-defined]

    def program() -> None:
        for i in range(COUNT):
            PvrdmaHostSettings(f"host-{i}", host_name=f"esxi-{i}", vmknic_device="vmk1")
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
    from components.k8s.api_ready import ApiServerReadyProvider
    from components.vsphere.host_graphics import HostGraphicsModeProvider
    from components.vsphere.vgpu import VgpuAttachmentProvider

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
