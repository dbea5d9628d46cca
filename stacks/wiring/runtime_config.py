"""Read the environment inside `pulumi up`/`preview`, from the config the engine hands the program."""

from __future__ import annotations

import os

import pulumi
from pulumi.runtime import config as runtime_config

from components.vcenter.errors import VsphereError
from components.vcenter.settings import conflict_message, connection_conflicts
from stacks.environment.loader import ConfigView, InvalidEnvironment, load_environment
from stacks.environment.model import Environment


def current_config_view() -> ConfigView:
    """Every config key the engine passed, with secret values left out (only their names kept)."""
    values = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = set(runtime_config.get_config_secret_keys_env()) | set(runtime_config._SECRET_KEYS.get())
    return ConfigView(
        values={k: v for k, v in values.items() if k not in secret_keys},
        secret_keys=frozenset(secret_keys),
        stack=pulumi.get_stack(),
    )


def connection_problems(view: ConfigView) -> list[str]:
    """The `vsphere:*` keys this stack's config and the run's VSPHERE_* variables set differently.

    Checked here, before the first pulumi-vsphere lookup (issue 53 item 8): pulumi-vsphere takes
    the stack config's value over the variable's, so its lookups would reach another vCenter (or
    skip TLS verification the environment asks for) before our plugin, which refuses the
    disagreement, is ever called. Secret keys are not in the view; they are refused in stack files
    anyway (`validate`)."""
    try:
        conflicts = connection_conflicts(view.values, os.environ)
    except VsphereError as unreadable:  # a boolean that is neither true nor false
        return [str(unreadable)]
    return [conflict_message(conflicts)] if conflicts else []


def environment_from_stack_config() -> Environment:
    """The validated environment, or a `pulumi.RunError` listing every problem (no traceback)."""
    view = current_config_view()
    problems = connection_problems(view)
    try:
        environment = load_environment(view)
    except InvalidEnvironment as invalid:
        problems = [*invalid.problems, *problems]
    if problems:
        raise pulumi.RunError(f"the stack configuration has {len(problems)} problem(s):\n" + "\n".join(problems))
    return environment
