"""Every node's user-data of every shipped stack passes the real `cloud-init schema`.

The user-data is what the program puts in each VM's `guestinfo.userdata` (base64), taken from the
real `__main__.py` under the mock runtime. Debian 12's cloud-init is 22.4:
`cloud-init schema --config-file F` prints `Valid cloud-config: F` and exits 0, or prints
`Cloud config schema errors: <key path>: <problem>, ...` on stderr and exits 1 (it also insists on
the `#cloud-config` first line). 22.4 checks the keys of the modules it knows (a `write_files`
entry's `permissions` must be a string, say); an unknown top-level key passes. It has no schema for
the network config in our metadata (`--schema-type network-config` came in later releases).
Without cloud-init the tests skip, except under CI=true, where they fail.

The user-data carries the bootstrap token and, on control-plane nodes, keys: it is written only to
the test's temporary directory, readable by its owner alone, and never printed on success.
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from stacks.tools.plan.mock_runtime import ProgramRun
from tests.program.conftest import run_view, stack_view
from tests.real_parts import require_program

STACKS = ["dev", "staging", "prod", "sim"]
VM = "vsphere:index/virtualMachine:VirtualMachine"


def _cloud_init() -> str:
    return require_program("cloud-init", "/usr/bin/cloud-init", "cloud-init")


def user_data(run: ProgramRun) -> dict[str, str]:
    """VM resource name -> its user-data."""
    found = {}
    for vm in run.by_type(VM):
        extra = vm.plain_inputs().get("extraConfig") or {}
        found[vm.name] = base64.b64decode(extra["guestinfo.userdata"]).decode()
    return found


def schema_check(cloud_init: str, text: str, folder: Path, name: str) -> subprocess.CompletedProcess[str]:
    path = folder / f"{name}.yaml"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    try:
        return subprocess.run(
            [cloud_init, "schema", "--config-file", str(path)], capture_output=True, text=True, timeout=120
        )
    finally:
        path.unlink()


@pytest.fixture(scope="module", params=STACKS)
def stack_user_data(request: pytest.FixtureRequest) -> tuple[str, dict[str, str]]:
    stack: str = request.param
    return stack, user_data(run_view(stack_view(stack), stack))


def test_every_nodes_user_data_passes_cloud_inits_schema(
    stack_user_data: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    cloud_init = _cloud_init()
    stack, documents = stack_user_data
    assert documents, f"{stack}: no VM has user-data"
    failures = []
    for vm, text in sorted(documents.items()):
        result = schema_check(cloud_init, text, tmp_path, vm)
        if result.returncode != 0 or "Valid cloud-config" not in result.stdout:
            failures.append(f"{stack}/{vm}: exit {result.returncode}: {(result.stdout + result.stderr).strip()}")
    assert not failures, "\n".join(failures)


def test_the_check_is_not_vacuous_a_broken_document_fails(tmp_path: Path) -> None:
    """The same check on a dev node's user-data with a file mode YAML reads as a number (0600 -> 384)."""
    cloud_init = _cloud_init()
    name, text = sorted(user_data(run_view(stack_view("dev"), "dev")).items())[0]
    document = yaml.safe_load(text)
    document["write_files"][0]["permissions"] = 0o600
    broken = "#cloud-config\n" + yaml.safe_dump(document, sort_keys=False)
    result = schema_check(cloud_init, broken, tmp_path, name)
    assert result.returncode == 1
    assert "write_files.0.permissions: 384 is not of type 'string'" in result.stderr
