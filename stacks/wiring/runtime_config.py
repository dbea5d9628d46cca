"""Read the environment inside `pulumi up`/`preview`, from the config the engine hands the program."""

from __future__ import annotations

import pulumi
from pulumi.runtime import config as runtime_config

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


def environment_from_stack_config() -> Environment:
    """The validated environment, or a `pulumi.RunError` listing every problem (no traceback)."""
    try:
        return load_environment(current_config_view())
    except InvalidEnvironment as invalid:
        raise pulumi.RunError(
            f"the stack configuration has {len(invalid.problems)} problem(s):\n" + "\n".join(invalid.problems)
        ) from None
