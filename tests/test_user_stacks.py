"""A user's edits to their own stack files leave the project's tests green.

The README tells a user to edit `Pulumi.dev.yaml` to their estate; docs/environments.md scales out
by adding hosts and workers; other work removes `vsphere:user` or moves the Kubernetes version.
None of that may fail a test: the project's tests read tests/fixtures/stacks, and only the checks
that hold for any stack file (tests/test_repository_stacks.py, marked `user_stacks`) read the
user's files. Here a copy of the repository gets those edits and its `user_stacks` tests run; and
tests/conftest.py's guard, which fails any unmarked test that reads a user's stack file, is shown
to work.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stacks.environment.loader import ConfigView, load_environment, read_stack_file
from tests.stack_fixtures import FIXTURE_STACKS, ROOT, fixture_stack, fixture_text, fixture_view
from tests.user_edits import USER_DOMAIN, as_a_user_edits_dev

MARK = "user_stacks"


def _repository_copy(folder: Path) -> Path:
    """The repository's files as a clone has them (tracked and new, not ignored ones)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if not source.is_file() or "__pycache__" in name:
            continue  # deleted in the work tree, or a submodule
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    (folder / ".venv").symlink_to(ROOT / ".venv")  # the README's commands activate it
    return folder


def _files_with_the_mark(project: Path) -> list[str]:
    """The test files with `user_stacks` tests, but this one (it would run itself again)."""
    return sorted(
        str(path.relative_to(project))
        for path in (project / "tests").rglob("test_*.py")
        if re.search(rf"\bmark\.{MARK}\b", path.read_text()) and path.name != Path(__file__).name
    )


def test_the_edits_are_what_a_user_makes() -> None:
    dev = fixture_text("dev")
    edited = load_environment(ConfigView(values=yaml.safe_load(as_a_user_edits_dev(dev))["config"]))
    before = load_environment(fixture_view("dev"))
    assert [h.name for h in edited.hosts[:4]] == [f"user-gpu0{i}.{USER_DOMAIN}" for i in range(1, 5)]
    assert len(edited.hosts) == len(before.hosts) + 2
    assert [n.name for n in edited.gpu_workers.nodes[-2:]] == ["scale-out-1", "scale-out-2"]
    # and again on an already edited dev: the test holds in a user's repository too
    again = load_environment(ConfigView(values=yaml.safe_load(as_a_user_edits_dev(as_a_user_edits_dev(dev)))["config"]))
    assert len(again.gpu_workers.nodes) == len(before.gpu_workers.nodes) + 4


@pytest.mark.user_stacks  # it copies the user's stack files (and edits the copies)
def test_a_user_edited_dev_leaves_the_stack_file_checks_green(tmp_path: Path) -> None:
    project = _repository_copy(tmp_path / "project")
    dev = project / "Pulumi.dev.yaml"
    for stack_file in project.glob("Pulumi.*.yaml"):  # what issue 40 does: the user comes from elsewhere
        stack_file.write_text(re.sub(r"(?m)^  vsphere:user: .*\n", "", stack_file.read_text()))
    before = load_environment(read_stack_file(dev))
    dev.write_text(as_a_user_edits_dev(dev.read_text()))
    env = load_environment(read_stack_file(dev))  # the edit is valid
    assert len(env.gpu_workers.nodes) == len(before.gpu_workers.nodes) + 2
    marked = _files_with_the_mark(project)
    assert "tests/test_repository_stacks.py" in marked
    suite = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", MARK, *marked],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert suite.returncode == 0, suite.stdout[-4000:] + suite.stderr[-2000:]
    assert re.search(r"\b(\d+) passed\b", suite.stdout), suite.stdout[-500:]


GUARDED = """
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_reads_a_user_stack_unmarked() -> None:
    (ROOT / "Pulumi.dev.yaml").read_text()


@pytest.mark.user_stacks
def test_reads_a_user_stack_marked() -> None:
    (ROOT / "Pulumi.dev.yaml").read_text()


def test_reads_a_fixture() -> None:
    (ROOT / "tests" / "fixtures" / "stacks" / "Pulumi.dev.yaml").read_text()
"""


def test_the_guard_fails_an_unmarked_test_that_reads_a_user_stack_file(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "tests" / "fixtures" / "stacks").mkdir(parents=True)
    for name in ("pyproject.toml", "tests/conftest.py", "tests/stack_fixtures.py"):
        shutil.copy(ROOT / name, project / name)
    for folder in (project, project / "tests" / "fixtures" / "stacks"):
        shutil.copy(fixture_stack("dev"), folder)
    (project / "tests" / "test_guarded.py").write_text(GUARDED)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:random_order",
            "-o",
            "addopts=",
            "tests/test_guarded.py",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert "1 failed, 2 passed" in result.stdout, result.stdout[-3000:]
    assert "test_reads_a_user_stack_unmarked read the user's stack file(s)" in result.stdout


@pytest.mark.parametrize("stack", FIXTURE_STACKS)
def test_each_fixture_stack_is_valid(stack: str) -> None:
    load_environment(fixture_view(stack))
