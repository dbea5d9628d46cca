"""`validate` in one pass: field errors beside rule errors, collisions with the stack files beside
the file, and hints that say the fix (nearest key, quote it, spaces not tabs, the stacks that exist).

Every cross-stack case runs in a temporary project folder, so the result never depends on which
stack files a user has added to the repository.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from stacks.environment.loader import ENVIRONMENT_KEY, inspect_environment, read_stack_file
from stacks.environment.model import Environment
from tests.stack_fixtures import fixture_stack

Cli = Callable[..., subprocess.CompletedProcess[str]]
E = ENVIRONMENT_KEY


def _problem_paths(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in result.stdout + result.stderr
    return [line.split(": ", 1)[0] for line in result.stderr.splitlines()[:-1]]


def test_a_copied_stack_file_collides_with_its_source(cli: Cli, root: Path, tmp_path: Path) -> None:
    """`cp Pulumi.dev.yaml Pulumi.test2.yaml && validate test2` used to pass."""
    shutil.copy(fixture_stack("dev"), tmp_path / "Pulumi.dev.yaml")
    shutil.copy(fixture_stack("dev"), tmp_path / "Pulumi.test2.yaml")

    result = cli("validate", "test2", "--file", tmp_path / "Pulumi.test2.yaml")

    assert result.returncode == 2
    paths = _problem_paths(result)
    for key in (
        "rdmaNetwork.switchName",
        "rdmaNetwork.portGroupName",
        "rdmaNetwork.vlanId",
        "vm.namePrefix",
        "vcenter.folder",
        "rdmaNetwork.subnet",
        "managementNetwork.subnet",
        "gpuWorkers.nodes[worker-1].host",
        "hosts[3].rdmaVmnics",
    ):
        assert f"{E}.{key}" in paths, key
    assert all("collides with Pulumi.dev.yaml" in line for line in result.stderr.splitlines()[:-1])
    assert "--switch-name" not in result.stderr and "--host-map" not in result.stderr  # clone's options, not ours

    planned = cli("plan", "test2", "--file", tmp_path / "Pulumi.test2.yaml", "--out", tmp_path / "plan")
    assert planned.returncode == 2 and not (tmp_path / "plan").exists()


def test_the_shipped_stacks_do_not_collide_with_each_other(cli: Cli, root: Path, tmp_path: Path) -> None:
    for stack in ("dev", "staging", "prod", "sim"):
        shutil.copy(fixture_stack(stack), tmp_path / f"Pulumi.{stack}.yaml")
    for stack in ("dev", "staging", "prod", "sim"):
        result = cli("validate", stack, "--file", tmp_path / f"Pulumi.{stack}.yaml")
        assert result.returncode == 0, result.stderr


def test_prod_without_protection_is_refused_before_the_policy_pack_does(cli: Cli, root: Path, tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.prod.yaml"
    stack.write_text((fixture_stack("prod")).read_text().replace("    protect: true\n", "    protect: false\n"))
    [line, _] = cli("validate", "prod", "--file", stack).stderr.splitlines()
    assert line.startswith(f"{E}.protect: false, but the policy pack requires protection here")
    stack.rename(tmp_path / "Pulumi.qa.yaml")  # the same file as another stack: no protection required
    assert cli("validate", "qa", "--file", tmp_path / "Pulumi.qa.yaml").returncode == 0


def test_field_errors_and_rule_errors_come_in_one_pass(cli: Cli, root: Path, tmp_path: Path) -> None:
    text = (fixture_stack("dev")).read_text()
    text = text.replace("      vlanId: 0\n", "      vlanId: 5000\n")  # a field error
    text = text.replace("rdmaIp: 192.168.0.52", "rdmaIp: 192.168.7.52")  # a rule error
    text = text.replace("serviceCidr: 10.96.0.0/12", "serviceCidr: 10.96.0.0/11")  # a rule that was a crash
    stack = tmp_path / "Pulumi.mixed.yaml"
    stack.write_text(text)

    paths = _problem_paths(cli("validate", "mixed", "--file", stack))

    assert sorted(paths) == sorted(
        [f"{E}.rdmaNetwork.vlanId", f"{E}.gpuWorkers.nodes[worker-2].rdmaIp", f"{E}.kubernetes.serviceCidr"]
    )


def test_rules_that_need_an_unparsed_value_stay_silent(root: Path, tmp_path: Path) -> None:
    """A bad subnet must not also be reported as every address 'outside' it."""
    stack = tmp_path / "Pulumi.x.yaml"
    stack.write_text((fixture_stack("dev")).read_text().replace("subnet: 192.168.0.0/24", "subnet: 192.168.0.1/24"))
    problems = inspect_environment(read_stack_file(stack)).problems
    assert [p.split(": ", 1)[0] for p in problems] == [f"{E}.rdmaNetwork.subnet"]


def test_misspelt_key_gets_the_nearest_one(cli: Cli, root: Path, tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.typo.yaml"
    text = (fixture_stack("dev")).read_text()
    stack.write_text(text.replace("switchName:", "swtichName:").replace("linkedClone:", "linked_clone:"))
    lines = cli("validate", "typo", "--file", stack).stderr.splitlines()
    assert any(
        line.startswith(f"{E}.rdmaNetwork.swtichName: ") and "did you mean 'switchName'?" in line for line in lines
    )
    assert any(line.startswith(f"{E}.vm.linked_clone: ") and "did you mean 'linkedClone'?" in line for line in lines)


def test_a_version_written_as_a_number_says_quote_it(cli: Cli, root: Path, tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.num.yaml"
    stack.write_text((fixture_stack("dev")).read_text().replace("version: 1.36.1", "version: 1.30"))
    [line, _] = cli("validate", "num", "--file", stack).stderr.splitlines()
    assert line.startswith(f"{E}.kubernetes.version: ") and "as the number 1.3 (1.30 loses its trailing zero)" in line
    assert '"1.30.0"' in line and "1.MINOR.PATCH" in line


def test_a_tab_says_indent_with_spaces(cli: Cli, tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.tab.yaml"
    stack.write_text("config:\n  vsphere-gpu-cluster:environment:\n\tname: dev\n")
    [line, _] = cli("validate", "tab", "--file", stack).stderr.splitlines()
    assert "indent with spaces, not tabs" in line


def test_an_unknown_stack_lists_the_stacks_that_exist(cli: Cli) -> None:
    [line, _] = cli("validate", "devv").stderr.splitlines()
    assert "Pulumi.devv.yaml: no such stack file; the stacks in " in line and "dev" in line.split("are: ")[1]


def test_a_leading_zero_is_refused_and_read_as_written(cli: Cli, root: Path, tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.octal.yaml"
    stack.write_text((fixture_stack("dev")).read_text().replace("vlanId: 0\n", "vlanId: 0130\n"))
    [line, _] = cli("validate", "octal", "--file", stack).stderr.splitlines()
    assert line.startswith(f"{E}.rdmaNetwork.vlanId: 0130 ") and "octal 88" in line and "write 130" in line


def test_every_schema_property_has_a_description() -> None:
    schema = Environment.model_json_schema(by_alias=True)
    missing = [
        f"{name}.{key}"
        for name, definition in [*schema["$defs"].items(), ("Environment", schema)]
        for key, prop in definition.get("properties", {}).items()
        if not prop.get("description")
    ]
    assert not missing, f"describe these fields (what, default, trade-off): {missing}"
