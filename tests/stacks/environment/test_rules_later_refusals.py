"""What vCenter or the cluster would refuse later, refused by `validate` first (issue 24).

Each case is a realistic mistake that used to pass `validate` and `plan` and fail only during
`pulumi up` (vCenter's reconfigure or power-on, the folder lookup, the CNI on the new cluster) or,
worse, deploy something that cannot work. Same table shape as test_rules.py: the key path and a
fragment of the message that names the fix; the FINE cases keep the rules from over-reaching.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.vsphere.vgpu.profiles import vgpu_extra_config
from stacks.environment.model import Environment
from tests.stacks.environment.test_rules import Edit, _both, _problems, _set, assert_reports

BROKEN: list[tuple[str, Edit, list[tuple[str, str]]]] = [
    # VM sizes vCenter refuses (vSphere Virtual Machine Administration, "Change the Memory Configuration").
    (
        "memory not a multiple of 4 MB",
        _set("gpuWorkers", "memoryMb", value=24570),
        [("gpuWorkers.memoryMb", "multiple of 4 MB")],
    ),
    (
        "control-plane memory not a multiple of 4 MB",
        _set("controlPlane", "memoryMb", value=16383),
        [("controlPlane.memoryMb", "multiple of 4 MB; use 16380 or 16384")],
    ),
    (
        "memory above what the hardware version allows",
        _set("controlPlane", "memoryMb", value=25 * 1024 * 1024 * 1024 // 1024),
        [("controlPlane.memoryMb", "24560 GB")],
    ),
    # Addresses used twice across roles.
    (
        "a worker's address as the DNS server",
        _set("managementNetwork", "dnsServers", value=["10.10.0.52"]),
        [("managementNetwork.dnsServers[0]", "gpuWorkers.nodes[1].managementIp")],
    ),
    (
        "the control plane's address as the DNS server",
        _set("managementNetwork", "dnsServers", value=["10.10.0.2", "10.10.0.50"]),
        [("managementNetwork.dnsServers[1]", "controlPlane.nodes[0].managementIp")],
    ),
    (
        "a worker's address as the API endpoint",
        _set("kubernetes", "controlPlaneEndpoint", value="10.10.0.53"),
        [("kubernetes.controlPlaneEndpoint", "gpuWorkers.nodes[2].managementIp")],
    ),
    (
        "a vmknic's address as the API endpoint",
        _set("kubernetes", "controlPlaneEndpoint", value="192.168.0.24"),
        [("kubernetes.controlPlaneEndpoint", "hosts[0].vmknicIp")],
    ),
    (
        "the gateway as the API endpoint",
        _set("kubernetes", "controlPlaneEndpoint", value="10.10.0.1"),
        [("kubernetes.controlPlaneEndpoint", "managementNetwork.gateway")],
    ),
    (
        "a DNS server as the API endpoint",
        _set("kubernetes", "controlPlaneEndpoint", value="10.10.0.2"),
        [("kubernetes.controlPlaneEndpoint", "managementNetwork.dnsServers[0]")],
    ),
    # Inventory paths where pulumi-vsphere takes a path relative to the datacenter's VM folder.
    (
        "absolute folder path",
        _set("vcenter", "folder", value="/Datacenter/vm/gpu-cluster/dev"),
        [("vcenter.folder", "write it as gpu-cluster/dev")],
    ),
    (
        "folder path from the datacenter",
        _set("vcenter", "folder", value="Datacenter/vm/gpu-cluster/dev"),
        [("vcenter.folder", "write it as gpu-cluster/dev")],
    ),
    (
        "folder path from the VM root",
        _set("vcenter", "folder", value="vm/gpu-cluster/dev"),
        [("vcenter.folder", "write it as gpu-cluster/dev")],
    ),
    # Add-on versions against the Kubernetes version.
    (
        "Calico too old for the Kubernetes version",
        _set("kubernetes", "cni", value={"version": "v3.28.2"}),
        [("kubernetes.cni.version", "Calico v3.28 is tested on Kubernetes 1.28-1.30, not 1.36")],
    ),
    (
        "Calico v3.29 on Kubernetes 1.36",
        _set("kubernetes", "cni", value={"version": "v3.29.4"}),
        [("kubernetes.cni.version", "use v3.32.1")],
    ),
]

FINE: list[tuple[str, Edit]] = [
    ("memory in whole GB", _set("gpuWorkers", "memoryMb", value=16384)),
    ("the gateway as the DNS server", _set("managementNetwork", "dnsServers", value=["10.10.0.1"])),
    (
        "the only control-plane node's address as the endpoint",
        _set("kubernetes", "controlPlaneEndpoint", value="10.10.0.50"),
    ),
    ("a nested folder", _set("vcenter", "folder", value="teams/ml/gpu-cluster-dev")),
    ("a folder whose name starts like vm", _set("vcenter", "folder", value="vms-gpu/dev")),
    (
        "Calico v3.30 on Kubernetes 1.33",
        _both(_set("kubernetes", "cni", value={"version": "v3.30.3"}), _set("kubernetes", "version", value="1.33.5")),
    ),
    ("a newer Calico than the table knows", _set("kubernetes", "cni", value={"version": "v3.32.0"})),
]


@pytest.mark.parametrize(("edit", "expected"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_validate_refuses_what_vcenter_or_the_cluster_would(
    dev_raw: dict[str, Any], edit: Edit, expected: list[tuple[str, str]]
) -> None:
    assert_reports(dev_raw, edit, expected)


@pytest.mark.parametrize("edit", [c[1] for c in FINE], ids=[c[0] for c in FINE])
def test_what_vcenter_accepts_passes(dev_raw: dict[str, Any], edit: Edit) -> None:
    edit(dev_raw)
    assert _problems(Environment.model_validate(dev_raw)) == []


def test_a_newer_boards_profile_gets_the_large_bar_settings() -> None:
    """`nvidia_`-prefixed profiles (vGPU 17+ boards) passed validation but crashed the plan, whose
    profile parser knew only `grid_` (found by the mutation test); an L40S is a large-BAR board."""
    assert vgpu_extra_config(["nvidia_l40s-48c"]) == {"pciPassthru.use64bitMMIO": "TRUE", "pciPassthru.64bitMMIOSizeGB": "128"}
