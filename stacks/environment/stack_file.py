"""`validate` of one stack file: its own problems, what the policy pack demands of its stack by
name, and its collisions with the stack files beside it, all in one pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stacks import PROJECT_DIR
from stacks.environment.collisions import cross_stack_problems
from stacks.environment.copy_hints import copy_hints, name_hints
from stacks.environment.deploy_order import DeployOrderError, read_deploy_order
from stacks.environment.loader import (
    ENVIRONMENT_KEY,
    ConfigView,
    InvalidEnvironment,
    inspect_environment,
    read_stack_file,
)
from stacks.environment.model import Environment
from stacks.environment.partial import UnparsedValue


def stack_name_problems(stack: str | None, env: Any) -> list[str]:
    """What the policy pack requires of a stack by its name: protection in the stacks it protects
    by default (`protected-in-prod`, policy/gpucluster_policy/protection.py), refused here first."""
    if stack is None:
        return []
    # The pack's own function and defaults, so the two cannot drift; imported only here because
    # it brings pulumi_policy with it.
    from policy.gpucluster_policy.protection import protection_required

    required, why = protection_required({}, stack)
    try:
        protect = bool(env.protect)
    except UnparsedValue:
        return []
    if required and not protect:
        return [
            f"{ENVIRONMENT_KEY}.protect: false, but the policy pack requires protection here ({why}); "
            "set protect: true, or `pulumi up` is refused by protected-in-prod"
        ]
    return []


CONFIG_ALLOW_UNVERIFIED_SSL = "vsphere:allowUnverifiedSsl"
"""pulumi-vsphere's key (components/vcenter/settings.py has the same; this folder does not import it)."""


def deployed_stack_problems(path: Path, stack: str | None, view: ConfigView) -> list[str]:
    """What a stack the deploy workflow deploys (`.github/deploy-order` beside its file) must not
    do: skip the verification of vCenter's certificate (issue 53 item 8). Its deployment hands the
    write account's password to whatever answers at `vsphere:vsphereServer`; unverified, that is
    anyone on the path between the deployment runner and vCenter. A stack only previewed or tried
    by hand (a lab, the simulator) may still skip it."""
    if stack is None:
        return []
    try:
        deployed = stack in read_deploy_order(path.parent)
    except DeployOrderError as error:
        return [f"the promotion order cannot be read: {error}"]
    unverified = str(view.values.get(CONFIG_ALLOW_UNVERIFIED_SSL, "")).strip().lower() in ("true", "1", "yes", "on")
    if deployed and unverified:
        return [
            f"{CONFIG_ALLOW_UNVERIFIED_SSL}: true, but {stack} is deployed by the workflow (.github/deploy-order): "
            "its deployment would send the write account's password to any server that answers for vCenter. "
            "Remove the key and trust vCenter's CA on the deployment runners instead (the system trust store, "
            'or SSL_CERT_FILE; docs/deploy.md, "vCenter\'s certificate")'
        ]
    return []


def check_stack_file(path: Path, stack: str | None = None) -> tuple[ConfigView, Environment]:
    """The file's config and environment; `InvalidEnvironment` with every problem otherwise."""
    view = read_stack_file(path)
    inspection = inspect_environment(view)
    problems = list(inspection.problems)
    hints: list[str] = []
    if inspection.partial is not None:
        problems += stack_name_problems(stack, inspection.partial)
        problems += cross_stack_problems(path, view, inspection.partial)
        problems += deployed_stack_problems(path, stack, view)
        hints = name_hints(path, stack, inspection.partial) + copy_hints(path, stack, inspection.partial, problems)
    if problems or inspection.env is None:
        raise InvalidEnvironment(problems, hints)
    return view, inspection.env


def stack_file_path(stack: str, file: str | None) -> Path:
    """The file a command reads for STACK: `--file` when given, else Pulumi.STACK.yaml of the project."""
    return Path(file) if file else PROJECT_DIR / f"Pulumi.{stack}.yaml"
