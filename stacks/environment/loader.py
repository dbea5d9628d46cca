"""Turn a stack's configuration into a validated `Environment`, or every problem with it.

Two sources feed the same checks: a `Pulumi.<stack>.yaml` file read offline (`python -m stacks`),
and the live Pulumi config inside `pulumi up` (`__main__.py`). Both reduce to a `ConfigView`: each
key's plain value, or only the fact that it is a secret (offline, `secure:` values stay unread).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic
import yaml

from components.k8s.facts import DNS_LABEL
from stacks.environment import rules
from stacks.environment.hints import describe_validation_error, yaml_hint
from stacks.environment.model import Environment
from stacks.environment.partial import UnparsedValue, salvage
from stacks.environment.rules import Problem
from stacks.environment.stack_names import stack_files

PROJECT = "vsphere-gpu-cluster"
ENVIRONMENT_KEY = f"{PROJECT}:environment"
KUBECONFIG_KEY = f"{PROJECT}:kubeconfig"
LICENSE_TOKEN_KEY = f"{PROJECT}:nvidiaLicenseToken"
OUR_KEYS = {ENVIRONMENT_KEY, KUBECONFIG_KEY, LICENSE_TOKEN_KEY}
MUST_BE_SECRET = {KUBECONFIG_KEY, LICENSE_TOKEN_KEY}
# vCenter credentials come by role (the run's VSPHERE_USER/VSPHERE_PASSWORD), never from a stack file
# (docs/environments.md, "Credentials come by role"): a preview decrypts the file with its own
# passphrase, and pulumi-vsphere takes the file's keys over the environment's read-only account.
CREDENTIAL_KEYS = ("vsphere:user", "vsphere:password")
NEVER_PREVIEWED = frozenset({"sim"})
"""Stacks scripts/pick_stacks.sh never previews: `sim`, whose login is the bundled simulator's
public one. Every other stack file may name neither credential key."""


class InvalidEnvironment(Exception):
    """Raised with every problem found; `str()` is one `<key.path>: <fix>` line per problem."""

    def __init__(self, problems: list[str], hints: list[str] | None = None) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
        self.hints = hints or []
        """What the person probably meant to do, printed after the problems (e.g. use `clone`)."""


@dataclass(frozen=True)
class ConfigView:
    """A stack's config: plain values, and the names of keys that hold secrets."""

    values: Mapping[str, Any]
    secret_keys: frozenset[str] = field(default_factory=frozenset)
    problems: tuple[str, ...] = ()
    """Problems found while reading the file that still let it be read (numbers YAML reads
    differently from how they look); reported with everything else."""
    stack: str | None = None
    """The stack's name where known (`Pulumi.<stack>.yaml`, or the engine's); None: the strict rules."""

    def has(self, key: str) -> bool:
        return key in self.values or key in self.secret_keys


def read_stack_file(path: Path) -> ConfigView:
    """Read a `Pulumi.<stack>.yaml`; `secure:` values are recorded as secrets, never decrypted."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidEnvironment([f"{path}: no such stack file; {_existing_stacks_hint(path)}"]) from None
    except OSError as error:
        raise InvalidEnvironment([f"{path}: cannot be read ({error.strerror})"]) from None
    try:
        document = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        reason = getattr(error, "problem", None) or "syntax error"
        hint = yaml_hint(text, error)
        raise InvalidEnvironment([f"{path}: not valid YAML{line}: {reason}{hint}"]) from None
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
    problems = []
    for where, number in _ambiguous_numbers(values, ()):
        key, *rest = where
        root = str(key)
        problems.append(f"{rules.format_path(root, rest)}: {number.explain()}")
    name = re.fullmatch(r"Pulumi\.(.+)\.yaml", path.name)
    return ConfigView(
        values=_as_written(values),
        secret_keys=frozenset(secret_keys),
        problems=tuple(problems),
        stack=name.group(1) if name else None,
    )


def _existing_stacks_hint(path: Path) -> str:
    found = sorted(stack_files(path.parent))
    if path.name.startswith("Pulumi.") and found:
        # A new stack is best made from an existing one by `clone` (names and addresses re-derived).
        new = path.name[len("Pulumi.") : -len(".yaml")] or "NEW"
        source = "dev" if "dev" in found else found[0]
        return (
            f"the stacks in {path.parent} are: {', '.join(found)}; create it from one of them with "
            f"`python -m stacks clone {source} {new} --vlan N --rdma-subnet CIDR --mgmt-subnet CIDR` "
            "(then `pulumi stack init`), or pass --file"
        )
    return "create it with `pulumi stack init` or pass --file"


class AmbiguousInt(int):
    """An integer YAML 1.1 reads differently from YAML 1.2 (and from how a person reads it)."""

    raw: str

    def explain(self) -> str:
        text = self.raw
        if ":" in text:
            return (
                f"{text} is read by YAML 1.1 as the base-60 number {int(self)}; quote it if it is text, "
                "or write the number you mean"
            )
        if "_" in text:
            return f"{text} is read as {int(self)} by YAML 1.1 but as text by YAML 1.2; write it without '_'"
        decimal = int(text.replace("_", ""), 10)
        return (
            f"{text} is written with a leading zero, which YAML 1.1 (what PyYAML and older tools read) takes as "
            f"octal {int(self)}, and YAML 1.2 as {decimal}; write {decimal} without the leading zero"
        )


_AMBIGUOUS_INT = re.compile(r"^[-+]?(0[0-9_]+|[0-9][0-9_]*(:[0-5]?[0-9])+|[0-9]+_[0-9_]*)$")


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    value = yaml.SafeLoader.construct_yaml_int(loader, node)
    if _AMBIGUOUS_INT.match(node.value):
        number = AmbiguousInt(value)
        number.raw = node.value
        return number
    return value


def _ambiguous_numbers(value: Any, where: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], AmbiguousInt]]:
    if isinstance(value, AmbiguousInt):
        return [(where, value)]
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in _ambiguous_numbers(v, (*where, k))]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in _ambiguous_numbers(v, (*where, i))]
    return []


def _as_written(value: Any) -> Any:
    """Ambiguous integers as the text the user wrote (the problem is reported; the checks go on)."""
    if isinstance(value, AmbiguousInt):
        return value.raw
    if isinstance(value, dict):
        return {k: _as_written(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_written(v) for v in value]
    return value


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
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


@dataclass(frozen=True)
class Inspection:
    """Everything `validate` learns from a stack's config in one pass."""

    env: Environment | None
    """The environment, when it has no problem at all."""
    partial: Any
    """As much of the environment as parsed (`Unparsed` where a value failed), or None when the
    environment key itself is unusable; rules and cross-stack checks run on it."""
    problems: list[str]


def inspect_environment(view: ConfigView) -> Inspection:
    """Every problem with the stack's config: field errors and every rule that can still run."""
    problems = list(view.problems) + _config_key_problems(view)
    raw = view.values.get(ENVIRONMENT_KEY)
    if isinstance(raw, str):
        # Inside the Pulumi runtime, structured config arrives as a JSON string.
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            problems.append(f"{ENVIRONMENT_KEY}: must be a structured object (YAML mapping), not a string")
            return Inspection(None, None, problems)
    if raw is None and ENVIRONMENT_KEY in view.secret_keys:
        problems.append(
            f"{ENVIRONMENT_KEY}: stored as a secret; the environment is plain configuration (keep secrets in their own keys)"
        )
        return Inspection(None, None, problems)
    if raw is None:
        problems.append(
            f"{ENVIRONMENT_KEY}: missing; every stack describes its environment under this key (see Pulumi.dev.yaml)"
        )
        return Inspection(None, None, problems)
    env: Environment | None
    try:
        env = Environment.model_validate(raw)
        partial: Any = env
    except pydantic.ValidationError as error:
        problems.extend(describe_validation_error(error, ENVIRONMENT_KEY, raw))
        env = None
        partial = salvage(Environment, raw) if isinstance(raw, dict) else None
    if partial is not None:
        problems.extend(p.render(ENVIRONMENT_KEY) for p in rules.check(partial))
        with contextlib.suppress(UnparsedValue):
            problems.extend(_secret_presence_problems(partial, view))
    problems = [name_nodes(problem, raw) for problem in problems]
    return Inspection(env if not problems else None, partial, problems)


_NODE_PATH = re.compile(r"\b(controlPlane|gpuWorkers)\.nodes\[(\d+)\]")


def name_nodes(line: str, raw: Any) -> str:
    """`gpuWorkers.nodes[1]` -> `gpuWorkers.nodes[worker-2]`: a person finds a node by its name
    (the form `plan --against` prints too); the index stays where the name is missing or shared."""

    def named(match: re.Match[str]) -> str:
        pool = raw.get(match.group(1)) if isinstance(raw, dict) else None
        nodes = pool.get("nodes") if isinstance(pool, dict) else None
        index = int(match.group(2))
        if not isinstance(nodes, list) or index >= len(nodes) or not isinstance(nodes[index], dict):
            return match.group(0)
        name = nodes[index].get("name")
        names = [node.get("name") for node in nodes if isinstance(node, dict)]
        if not isinstance(name, str) or not DNS_LABEL.match(name) or names.count(name) > 1:
            return match.group(0)
        return f"{match.group(1)}.nodes[{name}]"

    return _NODE_PATH.sub(named, line)


def load_environment(view: ConfigView) -> Environment:
    """Validate everything about the stack's config; raise `InvalidEnvironment` with all problems."""
    inspection = inspect_environment(view)
    if inspection.problems or inspection.env is None:
        raise InvalidEnvironment(inspection.problems)
    return inspection.env


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
        if key in CREDENTIAL_KEYS and view.stack not in NEVER_PREVIEWED:
            problems.append(
                f"{key}: a stack file holds no vCenter credentials (a pull request's preview reads this file "
                "with its own passphrase, and pulumi-vsphere would take this account over the preview's "
                f"read-only one); remove it with `pulumi config rm {key}` and give each run its role's account "
                "as VSPHERE_USER / VSPHERE_PASSWORD (in CI: the GitHub environment's secrets; "
                'docs/environments.md, "Credentials come by role")'
            )
    return problems


def _secret_presence_problems(env: Environment, view: ConfigView) -> list[str]:
    problems: list[str] = []
    if env.kubernetes.mode == "existing" and not view.has(KUBECONFIG_KEY):
        problems.append(
            f"{KUBECONFIG_KEY}: missing; kubernetes.mode 'existing' needs the cluster's kubeconfig: "
            f"`pulumi config set --secret {KUBECONFIG_KEY} < kubeconfig`"
        )
    if env.kubernetes.mode == "bootstrap" and view.has(KUBECONFIG_KEY):
        problems.append(
            f"{KUBECONFIG_KEY}: is ignored with kubernetes.mode 'bootstrap' (the stack builds its own cluster and "
            f"its own kubeconfig); remove it (`pulumi config rm {KUBECONFIG_KEY}`) or set kubernetes.mode: existing"
        )
    if env.gpu.mode == "device-plugin" and view.has(LICENSE_TOKEN_KEY):
        problems.append(
            f"{LICENSE_TOKEN_KEY}: is ignored with gpu.mode 'device-plugin' (only the GPU Operator licenses the "
            f"guest driver); remove it (`pulumi config rm {LICENSE_TOKEN_KEY}`) or set gpu.mode: gpu-operator"
        )
    if env.gpu.mode == "gpu-operator" and not view.has(LICENSE_TOKEN_KEY):
        problems.append(
            f"{LICENSE_TOKEN_KEY}: missing; gpu.mode 'gpu-operator' needs the NLS client configuration token: "
            f"`pulumi config set --secret {LICENSE_TOKEN_KEY} < client_configuration_token.tok`"
        )
    return problems


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
