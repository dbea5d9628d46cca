"""`validate` points a person who copied a stack file by hand, or names a stack that has no file,
to `python -m stacks clone` (issue 25, item 6): the tool that re-derives every name and address."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.stack_fixtures import fixture_project_dir, fixture_stack

ROOT = Path(__file__).resolve().parents[3]
CLONE_DEV_QA = "python -m stacks clone dev qa --vlan N --rdma-subnet CIDR --mgmt-subnet CIDR"


def validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stacks", "validate", *args], capture_output=True, text=True, cwd=fixture_project_dir(), timeout=120
    )


def project(tmp_path: Path) -> Path:
    for stack in ("dev", "staging", "prod"):
        shutil.copy(fixture_stack(stack), tmp_path)
    return tmp_path


def test_a_missing_stack_suggests_clone(tmp_path: Path) -> None:
    result = validate("qa", "--file", str(project(tmp_path) / "Pulumi.qa.yaml"))
    assert result.returncode == 2
    assert "Pulumi.qa.yaml: no such stack file; the stacks in " in result.stderr
    assert f"create it from one of them with `{CLONE_DEV_QA}`" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_stack_in_the_project_suggests_clone() -> None:
    result = validate("qa-does-not-exist")
    assert result.returncode == 2
    assert "`python -m stacks clone dev qa-does-not-exist --vlan N" in result.stderr


def test_a_hand_copied_stack_file_is_told_to_use_clone(tmp_path: Path) -> None:
    here = project(tmp_path)
    shutil.copy(here / "Pulumi.dev.yaml", here / "Pulumi.qa.yaml")  # the usual Pulumi habit
    result = validate("qa", "--file", str(here / "Pulumi.qa.yaml"))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == "20 problem(s) found"  # stderr: the problems and their count
    lines = result.stdout.splitlines()  # stdout: what to do instead
    assert lines[0] == (
        "hint: vsphere-gpu-cluster:environment.name is 'dev', but this file is stack 'qa' (Pulumi.qa.yaml): "
        f"set name: qa, or create the stack with `{CLONE_DEV_QA}`"
    )
    assert lines[1] == (
        "hint: Pulumi.qa.yaml looks like a copy of Pulumi.dev.yaml (20 of the problems above collide with it): "
        f"`{CLONE_DEV_QA} --force` writes it with every name, VLAN and address re-derived "
        "(add --host-map OLD=NEW for its ESXi hosts)"
    )


def test_a_copy_with_only_its_name_changed_still_gets_the_hint(tmp_path: Path) -> None:
    here = project(tmp_path)
    (here / "Pulumi.qa.yaml").write_text(
        (here / "Pulumi.dev.yaml").read_text().replace("    name: dev\n", "    name: qa\n")
    )
    result = validate("qa", "--file", str(here / "Pulumi.qa.yaml"))
    assert result.returncode == 2
    assert "environment.name" not in result.stdout
    assert result.stdout.startswith("hint: Pulumi.qa.yaml looks like a copy of Pulumi.dev.yaml (20 of")


def test_a_proper_clone_gets_neither(tmp_path: Path) -> None:
    here = project(tmp_path)
    hosts = [a for i in range(1, 5) for a in ("--host-map", f"esxi-0{i}.lab.example.com=esxi-1{i}.lab.example.com")]
    cloned = subprocess.run(
        [sys.executable, "-m", "stacks", "clone", "dev", "qa", "--vlan", "177", "--rdma-subnet", "192.168.50.0/24",
         "--mgmt-subnet", "10.50.0.0/24", *hosts, "--dir", str(here)],
        capture_output=True, text=True, cwd=fixture_project_dir(), timeout=120,
    )  # fmt: skip
    assert cloned.returncode == 0, cloned.stderr
    result = validate("qa", "--file", str(here / "Pulumi.qa.yaml"))
    assert result.returncode == 0, result.stderr
    assert "hint:" not in result.stdout + result.stderr


def test_a_draft_under_another_file_name_is_not_held_to_the_stack_name(tmp_path: Path) -> None:
    # `--file draft.yaml` is not the stack's own file: its name is not compared with the stack's.
    here = project(tmp_path)
    shutil.copy(fixture_stack("dev"), here / "draft.yaml")
    result = validate("qa", "--file", str(here / "draft.yaml"))
    assert "hint:" not in result.stdout


def test_a_valid_file_under_its_sources_name_passes_with_the_hint(tmp_path: Path) -> None:
    # The program names nothing after `name`, so a mismatch alone is not a problem, only a hint.
    here = project(tmp_path)
    result = validate("staging", "--file", str(here / "Pulumi.staging.yaml"))
    assert result.returncode == 0 and "hint:" not in result.stdout
    (here / "Pulumi.stg2.yaml").write_text((here / "Pulumi.staging.yaml").read_text())
    (here / "Pulumi.staging.yaml").unlink()
    renamed = validate("stg2", "--file", str(here / "Pulumi.stg2.yaml"))
    assert renamed.returncode == 0, renamed.stderr
    assert renamed.stdout.splitlines()[1].startswith(
        "hint: vsphere-gpu-cluster:environment.name is 'staging', but this file is stack 'stg2'"
    )
    assert "clone SRC stg2" in renamed.stdout  # Pulumi.staging.yaml is gone: no source to name
