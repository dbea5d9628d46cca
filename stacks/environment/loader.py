"""Turn a stack's configuration into a validated `Environment`, or every problem with it.

Two sources feed the same checks: a `Pulumi.<stack>.yaml` file read offline (`python -m stacks`),
and the live Pulumi config inside `pulumi up` (`__main__.py`). Both reduce to a `ConfigView`: each
key's plain value, or only the fact that it is a secret (offline, `secure:` values stay unread).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic
import yaml

from stacks.environment import rules
from stacks.environment.model import Environment
from stacks.environment.rules import Problem

PROJECT = "vsphere-gpu-cluster"
ENVIRONMENT_KEY = f"{PROJECT}:environment"
KUBECONFIG_KEY = f"{PROJECT}:kubeconfig"
LICENSE_TOKEN_KEY = f"{PROJECT}:nvidiaLicenseToken"
OUR_KEYS = {ENVIRONMENT_KEY, KUBECONFIG_KEY, LICENSE_TOKEN_KEY}
MUST_BE_SECRET = {KUBECONFIG_KEY, LICENSE_TOKEN_KEY, "vsphere:password"}


class InvalidEnvironment(Exception):
    """Raised with every problem found; `str()` is one `<key.path>: <fix>` line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class ConfigView:
    """A stack's config: plain values, and the names of keys that hold secrets."""

    values: Mapping[str, Any]
    secret_keys: frozenset[str] = field(default_factory=frozenset)

    def has(self, key: str) -> bool:
        return key in self.values or key in self.secret_keys


def read_stack_file(path: Path) -> ConfigView:
    """Read a `Pulumi.<stack>.yaml`; `secure:` values are recorded as secrets, never decrypted."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidEnvironment(
            [f"{path}: no such stack file; create it with `pulumi stack init` or pass --file"]
        ) from None
    except OSError as error:
        raise InvalidEnvironment([f"{path}: cannot be read ({error.strerror})"]) from None
    try:
        document = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        reason = getattr(error, "problem", None) or "syntax error"
        raise InvalidEnvironment([f"{path}: not valid YAML{line}: {reason}"]) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise InvalidEnvironment([f"{path}: the file must be a mapping with a top-level `config:` key"])
    config = document.get("config", {})
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise InvalidEnvironment([f"config: must be a mapping of `namespace:key: value` entries in {path}"])
    values: dict[str, Any] = {}
    secret_keys: set[str] = set()
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret_keys.add(str(key))
        else:
            values[str(key)] = value
    return ConfigView(values=values, secret_keys=frozenset(secret_keys))


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML, except that a key written twice is an error instead of the last one winning."""


def _construct_mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is written twice in the same mapping; keep one", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping_without_duplicates)


def load_environment(view: ConfigView) -> Environment:
    """Validate everything about the stack's config; raise `InvalidEnvironment` with all problems."""
    problems = _config_key_problems(view)
    raw = view.values.get(ENVIRONMENT_KEY)
    if isinstance(raw, str):
        # Inside the Pulumi runtime, structured config arrives as a JSON string.
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            problems.append(f"{ENVIRONMENT_KEY}: must be a structured object (YAML mapping), not a string")
            raise InvalidEnvironment(problems) from None
    if raw is None and ENVIRONMENT_KEY in view.secret_keys:
        problems.append(f"{ENVIRONMENT_KEY}: stored as a secret; the environment is plain configuration (keep secrets in their own keys)")
        raise InvalidEnvironment(problems)
    if raw is None:
        problems.append(
            f"{ENVIRONMENT_KEY}: missing; every stack describes its environment under this key (see Pulumi.dev.yaml)"
        )
        raise InvalidEnvironment(problems)
    try:
        env = Environment.model_validate(raw)
    except pydantic.ValidationError as error:
        problems.extend(_describe(error))
        raise InvalidEnvironment(problems) from None
    problems.extend(p.render(ENVIRONMENT_KEY) for p in rules.check(env))
    problems.extend(_secret_presence_problems(env, view))
    if problems:
        raise InvalidEnvironment(problems)
    return env


def _config_key_problems(view: ConfigView) -> list[str]:
    problems: list[str] = []
    for key in sorted(set(view.values) | view.secret_keys):
        if key.startswith(f"{PROJECT}:") and key not in OUR_KEYS:
            known = ", ".join(sorted(OUR_KEYS))
            problems.append(f"{key}: unknown key; this project reads only {known}")
        if key in MUST_BE_SECRET and key in view.values:
            problems.append(
                f"{key}: stored in plain text; remove it and run `pulumi config set --secret {key} <value>`"
            )
    return problems


def _secret_presence_problems(env: Environment, view: ConfigView) -> list[str]:
    problems: list[str] = []
    if env.kubernetes.mode == "existing" and not view.has(KUBECONFIG_KEY):
        problems.append(
            f"{KUBECONFIG_KEY}: missing; kubernetes.mode 'existing' needs the cluster's kubeconfig: "
            f"`pulumi config set --secret {KUBECONFIG_KEY} < kubeconfig`"
        )
    if env.gpu.mode == "gpu-operator" and not view.has(LICENSE_TOKEN_KEY):
        problems.append(
            f"{LICENSE_TOKEN_KEY}: missing; gpu.mode 'gpu-operator' needs the NLS client configuration token: "
            f"`pulumi config set --secret {LICENSE_TOKEN_KEY} < client_configuration_token.tok`"
        )
    return problems


_FIXES = {
    "extra_forbidden": "unknown key; remove it or fix its spelling",
    "missing": "required key is missing; add it",
}


def _describe(error: pydantic.ValidationError) -> list[str]:
    lines = []
    for item in error.errors(include_url=False):
        path = rules.format_path(ENVIRONMENT_KEY, item["loc"])
        message = _FIXES.get(item["type"])
        if message is None:
            message = str(item["msg"])
            if message.startswith("Value error, "):
                message = message[len("Value error, ") :]
            if item["type"] != "value_error" and not isinstance(item.get("input"), dict | list | None):
                message = f"{message} (got {item['input']!r})"
        if item["type"] == "extra_forbidden" and len(item["loc"]) > 0:
            message = f"{message}; see `python -m stacks schema` for the keys allowed here"
        lines.append(f"{path}: {message}")
    return lines


def config_for_runtime(view: ConfigView, secret_placeholder: str) -> tuple[dict[str, str], list[str]]:
    """The config map the Pulumi runtime would hold, for runs under mocks.

    Secrets we cannot decrypt offline get `secret_placeholder` as their value and stay marked
    secret, so the program treats them exactly as it treats real secrets.
    """
    config: dict[str, str] = {}
    for key, value in view.values.items():
        config[key] = json.dumps(value) if isinstance(value, dict | list) else _scalar(value)
    for key in view.secret_keys:
        config[key] = secret_placeholder
    return config, sorted(view.secret_keys)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def problems_to_text(problems: list[Problem], root: str = ENVIRONMENT_KEY) -> list[str]:
    return [p.render(root) for p in problems]
