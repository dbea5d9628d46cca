"""Issue 54's estate as a stack fixture: 6 ESXi hosts with two L40S each, a ConnectX on vmnic4,
3 control-plane VMs and one GPU worker per host holding both GPUs (two vGPUs).

Built from the test fixtures' dev stack (tests/stack_fixtures.py) grown to six workers by
benchmarks/stackgen.py's `scaled_environment` (one GPU host per worker, addresses allocated),
never from the repository's Pulumi.*.yaml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from benchmarks.stackgen import scaled_document
from stacks.environment.loader import ENVIRONMENT_KEY
from tests.stack_fixtures import fixture_text

HOSTS = 6
PROFILES = ["nvidia_l40s-48c", "nvidia_l40s-48c"]
WORKERS = [f"worker-{i}" for i in range(1, HOSTS + 1)]


def six_by_two_document() -> dict[str, Any]:
    document = scaled_document(yaml.safe_load(fixture_text("dev")), HOSTS)
    env = document["config"][ENVIRONMENT_KEY]
    env["name"] = "estate"
    env["vm"]["namePrefix"] = "estate-gpu"
    env["vcenter"]["gpuTemplate"] = "rocky9-k8s-vgpu-l40s-2x48c"
    env["gpuWorkers"]["vgpuProfiles"] = list(PROFILES)
    env["gpuWorkers"]["memoryMb"] = 131072
    env["gpuWorkers"]["vcpus"] = 16
    env["controlPlane"]["nodes"] = [{"name": f"master-{i}", "managementIp": f"10.10.0.{40 + i}"} for i in range(1, 4)]
    env["kubernetes"]["controlPlaneEndpoint"] = "k8s-api.lab.example.com"
    return document


def six_by_two_stack(folder: Path, name: str = "estate") -> Path:
    """Write the stack file `Pulumi.<name>.yaml` under `folder` and return its path."""
    path = folder / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(six_by_two_document(), sort_keys=False, width=120))
    return path
