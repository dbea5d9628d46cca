"""Whatever `validate` accepts, `plan` never crashes and the policy pack never refuses.

The shipped stacks are mutated widely and deterministically (tests/stacks/environment/mutations.py: every key
the model knows gets wrong types, values at and past its bounds, wrong formats, removal). Every
mutation is validated; a seeded sample of the accepted ones, at least one per key path, runs the
real program under the mock runtime in-process, and the policy pack's own functions judge the
plan. A crash or a violation is a check that lives only in a component or a policy: it must
become a rule in stacks/environment/ (README: "validated before any resource is registered").
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from policy.gpucluster_policy import offline
from stacks.environment.loader import (
    ENVIRONMENT_KEY,
    PROJECT,
    ConfigView,
    config_for_runtime,
    inspect_environment,
    read_stack_file,
)
from stacks.environment.stack_file import stack_name_problems
from stacks.tools.plan.command import resources_document
from stacks.tools.plan.mock_runtime import run_program, run_project_main
from tests.stack_fixtures import fixture_stack
from tests.stacks.environment.mutations import Mutation, all_mutations, apply, pairs

ROOT = Path(__file__).resolve().parents[3]
SEED = 15
# Plans cost 0.1-0.5 s each; these keep the whole test near a minute on two shared cores.
PLANS = {"dev": 110, "staging": 20, "prod": 20}
PAIR_PLANS = 40


def _view(base: ConfigView, env: dict[str, Any]) -> ConfigView:
    return ConfigView(values={**base.values, ENVIRONMENT_KEY: env}, secret_keys=base.secret_keys)


def _valid(view: ConfigView, stack: str) -> bool:
    inspection = inspect_environment(view)
    return not inspection.problems and not stack_name_problems(stack, inspection.env)


def _accepted(
    base: ConfigView, raw: dict[str, Any], mutations: list[Mutation], stack: str
) -> list[tuple[Mutation, ConfigView]]:
    accepted = []
    for mutation in mutations:
        _, path, value = mutation
        edited = apply(raw, path, value)
        if edited is None:
            continue
        view = _view(base, edited)
        # Validation itself must never crash, whatever the input.
        if _valid(view, stack):
            accepted.append((mutation, view))
    return accepted


def _sample(
    accepted: list[tuple[Mutation, ConfigView]], count: int, rng: random.Random
) -> list[tuple[Mutation, ConfigView]]:
    """One accepted mutation per key path first (seeded), then more at random up to `count`."""
    by_path: dict[Any, list[tuple[Mutation, ConfigView]]] = defaultdict(list)
    for item in accepted:
        by_path[item[0][1]].append(item)
    chosen = [rng.choice(items) for _, items in sorted(by_path.items(), key=lambda kv: repr(kv[0]))]
    rng.shuffle(chosen)
    rest = [item for item in accepted if item not in chosen]
    rng.shuffle(rest)
    return (chosen + rest)[:count]


def _plan_problems(view: ConfigView, stack: str) -> list[str]:
    config, secret_keys = config_for_runtime(view, "mutation-placeholder-secret")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PULUMI_ERROR_OUTPUT_STRING", "true")
        patch.setenv("PULUMI_STACK", stack)  # the pack judges the stack by its name, as in `pulumi up`
        try:
            run = run_program(
                run_project_main(ROOT), project=PROJECT, stack=stack, config=config, secret_keys=secret_keys
            )
        except Exception as error:  # any crash is the finding
            return [f"plan crashed: {type(error).__name__}: {error}"]
        violations = offline.run(resources_document(run)["resources"])
    return [f"policy {v.policy}: {v.message}" for v in violations]


@pytest.mark.parametrize("stack", sorted(PLANS))
def test_what_validate_accepts_plans_cleanly(stack: str) -> None:
    base = read_stack_file(fixture_stack(stack))
    raw = dict(base.values[ENVIRONMENT_KEY])
    mutations = all_mutations(raw)
    assert len(mutations) > 1000, "the generator lost keys"
    accepted = _accepted(base, raw, mutations, stack)
    rng = random.Random(f"{SEED}-{stack}")
    planned = _sample(accepted, PLANS[stack], rng)
    if stack == "dev":
        # Pairs of individually accepted mutations: interactions one mutation cannot reach.
        singles = [m for m, _ in accepted]
        for first, second in pairs(singles, PAIR_PLANS * 4, SEED):
            edited = apply(raw, first[1], first[2])
            edited = apply(edited, second[1], second[2]) if edited is not None else None
            if edited is None:
                continue
            view = _view(base, edited)
            if _valid(view, stack):
                planned.append(((f"{first[0]} + {second[0]}", first[1], None), view))
            if len(planned) >= PLANS[stack] + PAIR_PLANS:
                break
    findings = []
    for (description, path, _), view in planned:
        findings += [f"{'.'.join(map(str, path))} ({description}): {p}" for p in _plan_problems(view, stack)]
    assert not findings, "validate accepted what plan or the policy pack refuses:\n" + "\n".join(findings[:20])
    assert len(planned) >= min(len(accepted), 15)
