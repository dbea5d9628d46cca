"""The project's real `__main__.py` under the SDK's mock runtime, recorded.

`PULUMI_ERROR_OUTPUT_STRING=true` during every run: an Output turned into a string (an f-string
over an Output) raises instead of quietly writing a warning into a resource input.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stacks.environment.loader import (
    ENVIRONMENT_KEY,
    PROJECT,
    ConfigView,
    config_for_runtime,
    load_environment,
    read_stack_file,
)
from stacks.environment.model import Environment
from stacks.tools.plan.mock_runtime import ProgramRun, run_program, run_project_main
from tests.stack_fixtures import fixture_stack

ROOT = Path(__file__).resolve().parents[2]

EnvEdit = Callable[[dict[str, Any]], None]


def run_view(view: ConfigView, stack: str) -> ProgramRun:
    config, secret_keys = config_for_runtime(view, "test-placeholder-secret")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PULUMI_ERROR_OUTPUT_STRING", "true")
        return run_program(run_project_main(ROOT), project=PROJECT, stack=stack, config=config, secret_keys=secret_keys)


def stack_view(stack: str) -> ConfigView:
    return read_stack_file(fixture_stack(stack))


def edited_view(stack: str, edit: EnvEdit) -> ConfigView:
    view = stack_view(stack)
    values = copy.deepcopy(dict(view.values))
    edit(values[ENVIRONMENT_KEY])
    return ConfigView(values=values, secret_keys=view.secret_keys)


@pytest.fixture(scope="session")
def dev_env() -> Environment:
    return load_environment(stack_view("dev"))


@pytest.fixture(scope="session")
def dev_run() -> ProgramRun:
    return run_view(stack_view("dev"), "dev")


@pytest.fixture(scope="session")
def prod_run() -> ProgramRun:
    return run_view(stack_view("prod"), "prod")


@pytest.fixture(scope="session")
def run_edited() -> Callable[[EnvEdit], ProgramRun]:
    return lambda edit: run_view(edited_view("dev", edit), "dev")
