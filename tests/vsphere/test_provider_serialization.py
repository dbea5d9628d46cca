"""Our dynamic providers survive the trip Pulumi makes them take.

`pulumi up` serializes each provider with the SDK's `serialize_provider` (dill, classes by
reference) into state, and a separate process, `python -m pulumi.dynamic` started in the project
directory, loads it again. That process must find `components.*` from the project directory alone
and must get a provider that is ready to configure, holding no credentials.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pulumi.dynamic.dynamic import serialize_provider

from components.k8s.api.ready import ApiServerReadyProvider
from components.k8s.join.rotation import JoinTokenRotationProvider
from components.vsphere.dvs_host_member import DvsHostMemberProvider
from components.vsphere.host_graphics.resource import HostGraphicsModeProvider
from components.vsphere.pvrdma_host import PvrdmaHostSettingsProvider
from components.vsphere.vgpu.attachment import VgpuAttachmentProvider

PROJECT = Path(__file__).resolve().parents[2]

_LOADER = """
import base64, sys
import dill
provider = dill.loads(base64.b64decode(sys.stdin.read()))
print(type(provider).__module__ + "." + type(provider).__qualname__)
"""


@pytest.mark.parametrize(
    "provider",
    [
        PvrdmaHostSettingsProvider(),
        HostGraphicsModeProvider(),
        VgpuAttachmentProvider(),
        ApiServerReadyProvider(),
        JoinTokenRotationProvider(),
        DvsHostMemberProvider(),
    ],
    ids=lambda p: type(p).__name__,
)
def test_serialized_provider_loads_in_a_fresh_process_from_the_project_directory(provider: object) -> None:
    blob = serialize_provider(provider)  # type: ignore[arg-type]
    result = subprocess.run(
        [sys.executable, "-c", _LOADER],
        input=blob,
        capture_output=True,
        text=True,
        cwd=PROJECT,
        # What `python -m pulumi.dynamic` has: the working directory on sys.path, nothing else.
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT)},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{type(provider).__module__}.{type(provider).__qualname__}"
