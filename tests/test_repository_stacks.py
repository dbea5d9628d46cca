"""The checks that hold for every stack file of a repository, whatever the user wrote in it.

These read the repository's own `Pulumi.*.yaml` (the user's: marked `user_stacks`) and assert
nothing about their values: each is valid, collides with none of the others, plans, passes the
admission checks and the policy pack. Every other test reads tests/fixtures/stacks
(tests/stack_fixtures.py); tests/test_user_stacks.py runs this file against an edited dev.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.gpucluster_policy import offline
from stacks.cli import main
from tests.stack_fixtures import ROOT, repository_stack_files

pytestmark = pytest.mark.user_stacks

STACKS = sorted(repository_stack_files())


def test_the_repository_has_stack_files() -> None:
    assert STACKS, f"no Pulumi.*.yaml in {ROOT}"


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_file_is_valid_and_collides_with_no_other(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    # `validate STACK` reads the project's Pulumi.STACK.yaml and checks it against its siblings.
    code = main(["validate", stack])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith(f"Pulumi.{stack}.yaml: valid: environment ")


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_plans_admits_its_workloads_and_passes_the_policy_pack(
    stack: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code = main(["plan", stack, "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.out[-3000:] + captured.err  # exit 2: invalid, or a workload not admitted
    monkeypatch.setenv("PULUMI_STACK", stack)
    config_file = ROOT / "policy" / f"policy-config.{stack}.json"
    config = json.loads(config_file.read_text()) if config_file.is_file() else None
    resources = json.loads((tmp_path / "resources.json").read_text())["resources"]
    assert [(v.policy, v.urn, v.message) for v in offline.run(resources, config)] == []
