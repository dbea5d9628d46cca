"""Issue 40, item 2: no job without a protected environment reaches the deployment runners.

On `pull_request` GitHub runs the PR's own copy of the workflow files, so a runner label is no
boundary: any branch author can write a job with any `runs-on`. The boundary is GitHub's runner
group with *Workflow access: Selected workflows* pinned to `.github/workflows/deploy.yml@refs/heads/main`
("only jobs directly defined within the selected workflows" get its runners: docs.github.com,
*Managing access to self-hosted runners using groups*, "Changing which workflows can access a runner
group"). Our own files must agree with that group: only deploy.yml's jobs in the environments
`dev`, `staging`, `prod` (deployment branches: main only) ask for the deployment runners, by their
own variable; previews ask for a different runner set by another variable (docs/environments.md,
docs/deploy.md "Self-hosted runners").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[2]
WORKFLOWS = PROJECT / ".github" / "workflows"
ALL = sorted(WORKFLOWS.glob("*.yml"))
DEPLOY = WORKFLOWS / "deploy.yml"
DEPLOY_RUNNERS = "vars.PULUMI_DEPLOY_RUNNER_LABELS"
PREVIEW_RUNNERS = "vars.PULUMI_PREVIEW_RUNNER_LABELS"
# The deployment environments: one per stack of the promotion order (.github/deploy-order), named
# after it, each allowing the branch main only (docs/environments.md). The deploy job takes its
# environment from the matrix of those stacks (tests/workflow/test_site_stacks.py runs the order).
MATRIX_ENVIRONMENT = "${{ matrix.stack }}"
# What reaches a runner that deployments use: their variable, the one variable both shared before
# (its runners were the deployment runners), or any self-hosted label written out.
REACHES_DEPLOY_RUNNERS = (DEPLOY_RUNNERS, "vars.PULUMI_RUNNER_LABELS", "self-hosted", "group:")


def _load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    if True in document:  # YAML 1.1 reads the key `on` as True
        document["on"] = document.pop(True)
    return document


def _environment(job: dict[str, Any]) -> str | None:
    environment = job.get("environment")
    return environment.get("name") if isinstance(environment, dict) else environment


def _runs_on(job: dict[str, Any]) -> str:
    return yaml.safe_dump(job.get("runs-on", ""))


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_only_protected_deployment_jobs_can_run_on_the_deployment_runners(path: Path) -> None:
    workflow = _load(path)
    for job_id, job in workflow["jobs"].items():
        runs_on = _runs_on(job)
        if not any(marker in runs_on for marker in REACHES_DEPLOY_RUNNERS):
            continue
        where = f"{path.name} {job_id} (environment {_environment(job)!r}, runs-on {runs_on.strip()!r})"
        assert path == DEPLOY, f"{where}: only deploy.yml may ask for the deployment runners"
        assert _environment(job) == MATRIX_ENVIRONMENT, f"{where}: not the environment of the stack it deploys"
        # ... and that matrix holds only the promotion order's stacks, each a protected environment.
        assert job["strategy"]["matrix"] == {"stack": "${{ fromJSON(needs.order.outputs.stacks) }}"}, where
        assert DEPLOY_RUNNERS in runs_on, f"{where}: the deployment runners have a variable of their own"


def test_deployments_run_only_for_main() -> None:
    assert _load(DEPLOY)["on"] == {"push": {"branches": ["main"]}}


def test_previews_and_deployments_use_different_runners() -> None:
    preview = _load(WORKFLOWS / "preview.yml")["jobs"]["preview"]
    assert PREVIEW_RUNNERS in _runs_on(preview)
    assert DEPLOY_RUNNERS not in _runs_on(preview)
    assert PREVIEW_RUNNERS not in _runs_on(_load(DEPLOY)["jobs"]["up"])


def test_the_docs_give_the_runner_group_setting() -> None:
    deploy = (PROJECT / "docs" / "deploy.md").read_text()
    assert "Selected workflows" in deploy
    assert ".github/workflows/deploy.yml@refs/heads/main" in deploy
    environments = (PROJECT / "docs" / "environments.md").read_text()
    for name in ("PULUMI_DEPLOY_RUNNER_LABELS", "PULUMI_PREVIEW_RUNNER_LABELS"):
        assert name in environments, name
    assert "PULUMI_RUNNER_LABELS" not in environments.replace("PULUMI_DEPLOY_RUNNER_LABELS", "").replace(
        "PULUMI_PREVIEW_RUNNER_LABELS", ""
    )
