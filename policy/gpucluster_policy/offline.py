"""Run the pack over an offline plan (`python -m stacks plan STACK --out DIR` -> DIR/resources.json).

This is no substitute for `pulumi preview --policy-pack policy`, which sees real state and real
outputs; it lets a reviewer without vCenter or the Pulumi CLI see what the pack would say about a
stack's program. Each resource is handed to the policies the way pulumi-policy's analyzer does
(numbers as floats, properties behind the unknown-checking proxy, parents and dependencies as
resource objects). A plan records inputs, not outputs, so stack policies see inputs as props.

    python -m policy.gpucluster_policy.offline DIR/resources.json [--stack prod] [--config FILE.json]

The plan's resources name their stack (their URNs); a plan is judged as that stack, and refused
when --stack (or PULUMI_STACK) names another: the pack's stack rules would judge it wrongly.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import unknown_checking_proxy

from . import POLICIES


@dataclass(frozen=True)
class Violation:
    policy: str
    message: str
    urn: str | None


def _wire(value: Any) -> Any:
    """Values as they come off the wire: protobuf Struct numbers are doubles."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): _wire(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_wire(v) for v in value]
    return value


def _options(entry: Mapping[str, Any]) -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=bool(entry.get("protect", False)),
        ignore_changes=list(entry.get("ignoreChanges", [])),
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
        parent=entry.get("parent"),
    )


def policy_resources(entries: Sequence[Mapping[str, Any]]) -> list[PolicyResource]:
    """Plan entries (`resources.json`'s `resources`) as the PolicyResources a stack policy gets."""
    resources = [
        PolicyResource(
            entry["type"],
            unknown_checking_proxy(_wire(entry.get("inputs", {}))),
            entry["urn"],
            entry["name"],
            _options(entry),
            None,
            None,
            [],
            {},
        )
        for entry in entries
    ]
    by_urn = {r.urn: r for r in resources}
    for entry, resource in zip(entries, resources, strict=True):
        resource.parent = by_urn.get(entry.get("parent") or "")
        resource.dependencies.extend(by_urn[d] for d in entry.get("dependencies", []) if d in by_urn)
        for key, urns in (entry.get("propertyDependencies") or {}).items():
            resource.property_dependencies[key] = [by_urn[u] for u in urns if u in by_urn]
    return resources


def _collector(violations: list[Violation], policy: str, fixed_urn: str | None = None) -> Callable[..., None]:
    def report_violation(message: str, urn: str | None = None) -> None:
        violations.append(Violation(policy, message, fixed_urn or urn))

    return report_violation


def run(
    entries: Sequence[Mapping[str, Any]],
    config: Mapping[str, Mapping[str, Any]] | None = None,
    policies: Sequence[Policy] = POLICIES,
) -> list[Violation]:
    """Every violation the pack reports for a plan; `config` is `--policy-pack-config`'s content."""
    config = config or {}
    violations: list[Violation] = []
    resources = policy_resources(entries)
    for policy in policies:
        policy_config = dict(config.get(policy.name) or {})
        level = policy_config.pop("enforcementLevel", None)
        if level == EnforcementLevel.DISABLED.value:
            continue
        if isinstance(policy, StackValidationPolicy):
            policy.validate(StackValidationArgs(resources, policy_config), _collector(violations, policy.name))
        elif isinstance(policy, ResourceValidationPolicy):
            for resource in resources:
                args = ResourceValidationArgs(
                    resource.resource_type,
                    resource.props,
                    resource.urn,
                    resource.name,
                    resource.opts,
                    None,
                    policy_config,
                )
                # Resource policies always report against the resource they validate.
                policy.validate(args, _collector(violations, policy.name, fixed_urn=resource.urn))
    return violations


PLAN_HINT = "give the resources.json that `python -m stacks plan STACK --out DIR` wrote (or DIR itself)"


def _read_json(path: Path, what: str, problems: list[str]) -> Any:
    """The parsed file, or None with one line in `problems` saying what is wrong and what to do."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        problems.append(f"{what} {path}: no such file")
    except IsADirectoryError:
        problems.append(f"{what} {path}: is a folder, not a JSON file")
    except OSError as error:
        problems.append(f"{what} {path}: cannot be read ({error.strerror})")
    except ValueError as error:
        problems.append(f"{what} {path}: not JSON ({error})")
    return None


def _read_plan(path: Path, problems: list[str]) -> list[Mapping[str, Any]] | None:
    """A plan's resources; a plan folder stands for its resources.json."""
    if path.is_dir() and (path / "resources.json").is_file():
        path = path / "resources.json"
    before = len(problems)
    document = _read_json(path, "resources", problems)
    if len(problems) > before:
        problems[-1] += f"; {PLAN_HINT}"
        return None
    if not isinstance(document, dict) or not isinstance(document.get("resources"), list):
        problems.append(f"resources {path}: has no 'resources' list; {PLAN_HINT}")
        return None
    return document["resources"]


def stacks_of(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The stacks a plan's resources belong to, from their URNs: `urn:pulumi:STACK::PROJECT::TYPE::NAME`
    (pulumi.com/docs/iac/concepts/resources/names/#urns; the mock runtime builds them the same way)."""
    found = {str(e.get("urn", "")).split("::", 1)[0].removeprefix("urn:pulumi:") for e in entries}
    return sorted(stack for stack in found if stack and not stack.startswith("urn:"))


def stack_problem(path: Path, entries: Sequence[Mapping[str, Any]], wanted: str | None, said: str) -> str | None:
    """Why this plan cannot be judged as `wanted` (the stack --stack or PULUMI_STACK names): the
    pack's stack rules (protected-in-prod) would judge one stack's resources by another's rules."""
    stacks = stacks_of(entries)
    if len(stacks) > 1:
        return f"resources {path}: resources of more than one stack ({', '.join(stacks)}); {PLAN_HINT}"
    if wanted is None or not stacks or stacks[0] == wanted.rsplit("/", 1)[-1]:
        return None
    wanted = wanted.rsplit("/", 1)[-1]
    return (
        f"resources {path}: a plan of stack {stacks[0]!r} (its URNs begin urn:pulumi:{stacks[0]}::), not of "
        f"{wanted!r} ({said}); plan {wanted} first (`python -m stacks plan {wanted} --out build/plan/{wanted}`) "
        f"and give build/plan/{wanted}/resources.json"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m policy.gpucluster_policy.offline", description=__doc__.split("\n")[0]
    )
    parser.add_argument("resources", help="resources.json written by `python -m stacks plan` (or its folder)")
    parser.add_argument("--config", help="policy pack config JSON, as passed to --policy-pack-config")
    parser.add_argument("--stack", help="judge as this stack (what PULUMI_STACK tells the pack in a real run)")
    args = parser.parse_args(argv)
    problems: list[str] = []
    wanted: str | None = None
    entries = _read_plan(Path(args.resources), problems)
    config = _read_json(Path(args.config), "--config", problems) if args.config else {}
    if entries is not None:
        # A real run is told its stack by PULUMI_STACK; offline, --stack, a leftover PULUMI_STACK,
        # or else the plan's own stack, which the other two must agree with.
        wanted, said = args.stack, f"--stack {args.stack}"
        if wanted is None and os.environ.get("PULUMI_STACK", "").strip():
            wanted = os.environ["PULUMI_STACK"].strip()
            said = f"PULUMI_STACK={wanted}"
        problem = stack_problem(Path(args.resources), entries, wanted, said)
        if problem is not None:
            problems.append(problem)
        elif wanted is None and stacks_of(entries):
            wanted = stacks_of(entries)[0]
    if problems or entries is None or not isinstance(config, dict):
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    # The pack reads its stack from PULUMI_STACK, as in a real run; set only while it judges, so a
    # caller in the same process (the tests) is not left judging every later plan as this stack.
    before = os.environ.get("PULUMI_STACK")
    if wanted:
        os.environ["PULUMI_STACK"] = wanted
    try:
        violations = run(entries, config)
    finally:
        if before is None:
            os.environ.pop("PULUMI_STACK", None)
        else:
            os.environ["PULUMI_STACK"] = before
    for violation in violations:
        print(f"{violation.policy}: {violation.message}" + (f" [{violation.urn}]" if violation.urn else ""))
    print(f"{len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
