"""Only `Pulumi.<stack>.yaml` with a plain stack name is a stack (issue 55 item 6): a backup
beside the project, `Pulumi.lab.good.yaml` or `Pulumi.lab.yaml.bak`, is no stack, so it neither
collides with the stack it copies (a PR render failed with 58 collisions) nor is listed as one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stacks.environment.collisions import cross_stack_problems, stack_files
from stacks.environment.loader import InvalidEnvironment, load_environment, read_stack_file
from tests.stack_fixtures import fixture_stack

BACKUPS = ("Pulumi.lab.good.yaml", "Pulumi.Lab.yaml", "Pulumi._lab.yaml", "Pulumi..yaml")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(fixture_stack("dev"), tmp_path / "Pulumi.lab.yaml")
    shutil.copy(fixture_stack("staging"), tmp_path / "Pulumi.qa-2.yaml")
    for backup in BACKUPS:
        shutil.copy(tmp_path / "Pulumi.lab.yaml", tmp_path / backup)
    (tmp_path / "Pulumi.lab.yaml.bak").write_text((tmp_path / "Pulumi.lab.yaml").read_text())
    return tmp_path


def test_only_plain_stack_names_are_stack_files(project: Path) -> None:
    assert sorted(stack_files(project)) == ["lab", "qa-2"]


def test_a_backup_beside_the_stack_file_is_no_collision(project: Path) -> None:
    path = project / "Pulumi.lab.yaml"
    view = read_stack_file(path)
    assert cross_stack_problems(path, view, load_environment(view)) == []


def test_the_existing_stacks_hint_names_stacks_only(project: Path) -> None:
    with pytest.raises(InvalidEnvironment) as raised:
        read_stack_file(project / "Pulumi.nosuch.yaml")
    [line] = raised.value.problems
    assert "the stacks in " in line and ": lab, qa-2; " in line, line
