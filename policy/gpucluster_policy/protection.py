"""Prod protection: the RDMA switch, its port group and every VM carry `protect` in prod.

How the policy knows it is looking at prod, in order:
1. the policy config `requireProtection` (true/false), when set: `policy-config.prod.json`, which
   the prod deploy passes with `--policy-pack-config`, sets it explicitly;
2. otherwise the stack name, matched against `protectedStacks` (default `["prod"]`). The Pulumi
   CLI starts a policy pack with `PULUMI_STACK` (and `PULUMI_PROJECT`, `PULUMI_CONFIG`) in its
   environment, the same variables a program gets (pulumi/pulumi, analyzer_plugin.go,
   `constructEnv`), so a prod stack is protected even when someone forgets the config file.
The engine reports each resource's `protect` option to stack policies (`PolicyResource.opts`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pulumi_policy import StackValidationArgs

from ._common import PORT_GROUP_TYPE, SWITCH_TYPE, VM_TYPE, ReportViolation, as_bool, as_list, short_type

REQUIRE_KEY = "requireProtection"
STACKS_KEY = "protectedStacks"
DEFAULT_PROTECTED_STACKS = ("prod",)
PROTECTED_TYPES = (SWITCH_TYPE, PORT_GROUP_TYPE, VM_TYPE)


def current_stack() -> str | None:
    """The stack the policy pack runs for (`org/project/stack` reduced to `stack`), if the CLI said."""
    stack = os.environ.get("PULUMI_STACK", "").strip()
    return stack.rsplit("/", 1)[-1] or None


def protection_required(config: Mapping[str, Any], stack: str | None) -> tuple[bool, str]:
    """Whether protection is required, and why (for the message)."""
    if config.get(REQUIRE_KEY) is not None:
        required = as_bool(config.get(REQUIRE_KEY))
        return required, f"policy config {REQUIRE_KEY} is {str(required).lower()}"
    protected = (
        [str(s) for s in as_list(config.get(STACKS_KEY))] if STACKS_KEY in config else list(DEFAULT_PROTECTED_STACKS)
    )
    if stack is not None and stack in protected:
        return True, f"stack {stack!r} is one of {STACKS_KEY} {protected}"
    return False, f"stack {stack!r} is not one of {STACKS_KEY} {protected}"


def validate_protected_in_prod(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """In prod, the distributed switch, its port groups and all VMs are protected from deletion."""
    required, why = protection_required(args.get_config(), current_stack())
    if not required:
        return
    for resource in args.resources:
        if resource.resource_type in PROTECTED_TYPES and not resource.opts.protect:
            report_violation(
                f"{short_type(resource.resource_type)} {resource.name} is not protected ({why}); "
                "set `protect: true` in the stack's environment so `pulumi destroy` and replacements "
                "cannot delete it",
                resource.urn,
            )
