"""Issue 40, item 1: a stack file holds no vCenter credentials.

`pulumi preview` of a pull request runs the PR's code in the GitHub environment preview-<stack>, with
a passphrase that decrypts the stack file's `secure:` values, and pulumi-vsphere takes
`vsphere:user`/`vsphere:password` from the stack file before VSPHERE_USER/VSPHERE_PASSWORD
(tests/components/vcenter/test_connection_by_role.py cites where). So an account named in the file
is the one a preview gets, whatever read-only account its environment holds. The rule
(docs/environments.md, "Credentials come by role"): no stack file a preview runs against holds either
key. `sim` (the bundled simulator's public login) is never previewed (scripts/pick_stacks.sh), so
it may name them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.environment.loader import (
    NEVER_PREVIEWED,
    ConfigView,
    InvalidEnvironment,
    load_environment,
    read_stack_file,
)
from tests.stack_fixtures import fixture_stack

PROJECT = Path(__file__).resolve().parents[3]
SHIPPED = sorted(PROJECT.glob("Pulumi.*.yaml"))


def _with(tmp_path: Path, stack: str, extra: str) -> Path:
    text = fixture_stack("dev").read_text().replace("config:\n", f"config:\n{extra}", 1)
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(text)
    return path


@pytest.mark.user_stacks  # holds for any valid edit of the user's stack files
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_no_shipped_stack_file_a_preview_runs_against_names_an_account(path: Path) -> None:
    view = read_stack_file(path)
    stack = path.name[len("Pulumi.") : -len(".yaml")]
    assert "vsphere:password" not in view.values, f"{path.name}: vsphere:password in plain text"
    if stack not in NEVER_PREVIEWED:
        assert not view.has("vsphere:user"), f"{path.name}: vsphere:user"
        assert not view.has("vsphere:password"), f"{path.name}: vsphere:password"


def test_the_stacks_never_previewed_are_the_ones_the_picker_leaves_out() -> None:
    # scripts/pick_stacks.sh drops `sim` from every list it gives preview.yml and plan.yml.
    script = (PROJECT / "scripts" / "pick_stacks.sh").read_text()
    left_out = {line.split("grep -vx ", 1)[1].split()[0] for line in script.splitlines() if "grep -vx " in line}
    assert left_out == set(NEVER_PREVIEWED) == {"sim"}


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("  vsphere:user: svc-pulumi-prod@vsphere.local\n", "vsphere:user"),
        ("  vsphere:password:\n    secure: v1:AAAAAAAAAAAAAAAA\n", "vsphere:password"),
        ("  vsphere:password: hunter2\n", "vsphere:password"),
    ],
)
def test_validate_refuses_a_credential_in_a_previewed_stack_file(tmp_path: Path, extra: str, key: str) -> None:
    with pytest.raises(InvalidEnvironment) as refused:
        load_environment(read_stack_file(_with(tmp_path, "prod", extra)))
    lines = [line for line in refused.value.problems if line.startswith(f"{key}: ")]
    assert len(lines) == 1, refused.value.problems
    assert f"pulumi config rm {key}" in lines[0]
    assert "VSPHERE_USER" in lines[0] and "VSPHERE_PASSWORD" in lines[0]
    assert "hunter2" not in lines[0]


def test_the_program_refuses_it_too(tmp_path: Path) -> None:
    """Inside `pulumi preview` the engine's config view carries the stack name, not the file."""
    view = read_stack_file(_with(tmp_path, "dev", "  vsphere:user: administrator@vsphere.local\n"))
    runtime = ConfigView(values=view.values, secret_keys=view.secret_keys, stack="dev")
    with pytest.raises(InvalidEnvironment, match=r"^vsphere:user: "):
        load_environment(runtime)
    unnamed = ConfigView(values=view.values, secret_keys=view.secret_keys)  # no name: the strict rule
    with pytest.raises(InvalidEnvironment, match=r"^vsphere:user: "):
        load_environment(unnamed)


def test_the_simulator_stack_may_name_its_public_login(tmp_path: Path) -> None:
    sim = read_stack_file(fixture_stack("sim"))
    assert sim.stack == "sim" and sim.has("vsphere:user")
    load_environment(ConfigView(values=sim.values, secret_keys=sim.secret_keys | {"vsphere:password"}, stack="sim"))
