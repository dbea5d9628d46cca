"""The project's own stack files for its tests, apart from the user's.

`Pulumi.<stack>.yaml` in the repository root belong to the user: the README tells them to edit
dev to their estate, a scale out adds hosts and workers (docs/environments.md), and other work
changes them (a Kubernetes version, a removed `vsphere:user`). A test that asserts what they say
breaks on every such edit, so the project's tests read copies of their own here,
tests/fixtures/stacks/Pulumi.<stack>.yaml, frozen as the repository shipped them.

Only the checks that hold for any stack file of any repository (validate, plan, policy,
cross-stack collisions) read the user's files: they are marked `user_stacks` and take them from
`repository_stack_files()`. tests/conftest.py refuses any other test that opens one, and
tests/test_user_stacks.py edits dev in a copy of the project the way a user does and runs the
marked tests there.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from stacks.environment.loader import ConfigView, read_stack_file

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_STACKS_DIR = ROOT / "tests" / "fixtures" / "stacks"
FIXTURE_STACKS = ("dev", "staging", "prod", "sim")
"""The project's fixture stacks: `sim` is the one tried against the bundled simulator."""

PROJECT_FILES = ("Pulumi.yaml", "__main__.py", "pyproject.toml")
PROJECT_PACKAGES = (
    "components",
    "stacks",
    "provider",
    "manifests",
    "policy",
    "benchmarks",
    "schema",
    "templates",
    "scripts",
)
"""What `python -m stacks`, the program and scripts/ read, copied into a project folder for a test."""
PROJECT_LINKS = (".venv", "build", "vcsim")
"""Linked, not copied: the virtualenv scripts/ run, the simulator harness and its sources."""


def fixture_stack(stack: str) -> Path:
    """The fixture copy of `Pulumi.<stack>.yaml`."""
    path = FIXTURE_STACKS_DIR / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such fixture stack; the fixtures are {', '.join(FIXTURE_STACKS)}")
    return path


def fixture_view(stack: str) -> ConfigView:
    return read_stack_file(fixture_stack(stack))


def fixture_text(stack: str) -> str:
    return fixture_stack(stack).read_text()


def copy_fixture_stacks(folder: Path, stacks: tuple[str, ...] = FIXTURE_STACKS) -> Path:
    """`folder` with the fixture stack files (and nothing else) copied into it."""
    folder.mkdir(parents=True, exist_ok=True)
    for stack in stacks:
        shutil.copy(fixture_stack(stack), folder / f"Pulumi.{stack}.yaml")
    return folder


def project_with_fixture_stacks(folder: Path, *extra: str) -> Path:
    """A project folder a test can run `python -m stacks` in (cwd): the program's code, copied
    (the CLI finds the project from its own location), and the fixture stacks as its stack files.
    `extra`: more paths of the repository to copy (a test folder that runs there)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        shutil.copy(ROOT / name, folder / name)
    for package in (*PROJECT_PACKAGES, *extra):
        source = ROOT / package
        if source.is_dir():
            shutil.copytree(source, folder / package, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.exists():
            (folder / package).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, folder / package)
    for name in PROJECT_LINKS:
        if (ROOT / name).exists() and not (folder / name).exists():
            (folder / name).symlink_to(ROOT / name)
    return copy_fixture_stacks(folder)


@functools.cache
def fixture_project_dir() -> Path:
    """One `project_with_fixture_stacks` per test process, shared: run `python -m stacks ...` there
    (cwd) to have it read the fixtures. Read-only for tests: one that writes copies it first."""
    folder = Path(tempfile.mkdtemp(prefix="fixture-project-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return project_with_fixture_stacks(folder / "project")


def repository_stack_files(root: Path = ROOT) -> dict[str, Path]:
    """The user's stack files, stack name -> path: for `user_stacks` checks only."""
    return {path.name[len("Pulumi.") : -len(".yaml")]: path for path in sorted(root.glob("Pulumi.*.yaml"))}
