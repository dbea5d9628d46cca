"""Shared fixtures for the stack-file tests: the real stack files and ways to edit dev.

Edits happen on plain dicts (what `yaml.safe_load` gives), so every case goes through the same
validation a user's file does; nothing here knows how the rules are written.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, read_stack_file
from tests.stack_fixtures import fixture_stack

ROOT = Path(__file__).resolve().parents[2]
GOOD_STACKS = ("dev", "staging", "prod", "sim")
"""Every stack file the repository ships; `sim` is the one tried against the bundled simulator."""

EnvEdit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def dev_view() -> ConfigView:
    return read_stack_file(fixture_stack("dev"))


@pytest.fixture
def dev_raw(dev_view: ConfigView) -> dict[str, Any]:
    """A private deep copy of dev's environment mapping, to edit freely."""
    return copy.deepcopy(dict(dev_view.values[ENVIRONMENT_KEY]))


@pytest.fixture
def edited_view(dev_view: ConfigView) -> Callable[..., ConfigView]:
    """dev's config with the environment edited by `edit` and top-level keys added or removed."""

    def make(
        edit: EnvEdit | None = None,
        *,
        values: dict[str, Any] | None = None,
        drop: tuple[str, ...] = (),
        secrets: tuple[str, ...] = (),
    ) -> ConfigView:
        config = copy.deepcopy(dict(dev_view.values))
        if edit is not None:
            edit(config[ENVIRONMENT_KEY])
        config.update(values or {})
        for key in drop:
            config.pop(key, None)
        return ConfigView(values=config, secret_keys=dev_view.secret_keys | frozenset(secrets))

    return make


@pytest.fixture(scope="session")
def cli(fixture_project: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`python -m stacks ...` as a user runs it: a child process in a project directory whose stack
    files are the fixtures (tests/stack_fixtures.py), never the user's."""

    def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "stacks", *map(str, args)],
            cwd=fixture_project,
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run
