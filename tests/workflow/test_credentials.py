"""Issue 37, finding 1: a pull request's code never sees a credential it was not approved for.

A pull request from a branch of this repository runs `pip install`, `python -m stacks plan` and
`pulumi preview` (which executes `__main__.py`): the PR's own code, in a job whose environment holds
whatever secrets the workflow hands it. The rules checked here (docs/deploy.md, "Who sees which
secret"):
- no secret at workflow level: each job gets only what its own steps need, and only a job that runs
  in a GitHub environment gets any (environment secrets wait for that environment's reviewers);
- a preview runs in the environment `preview-<stack>` (its own read-only vCenter account and its own
  passphrase; required reviewers on protected stacks), and only for pull requests of this repository;
- the offline plan, the tests and the stack picker see no secret at all;
- `pull_request`, never `pull_request_target`; checkout does not keep its token; permissions are
  granted per job, write only where a comment is posted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[2]
WORKFLOWS = PROJECT / ".github" / "workflows"
PREVIEW, DEPLOY = WORKFLOWS / "preview.yml", WORKFLOWS / "deploy.yml"
ALL = sorted(WORKFLOWS.glob("*.yml"))
SECRET = re.compile(r"\$\{\{\s*secrets\.")
SAME_REPOSITORY = "github.event.pull_request.head.repo.full_name == github.repository"
# Steps that exchange the job's OIDC token for a short-lived credential; `id-token: write` is for them only.
OIDC_ACTIONS = (
    "pulumi/auth-actions",
    "aws-actions/configure-aws-credentials",
    "azure/login",
    "google-github-actions/auth",
)


def _load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    if True in document:  # YAML 1.1 reads the key `on` as True
        document["on"] = document.pop(True)
    return document


def _jobs(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    yield from _load(path)["jobs"].items()


def _secret_values(mapping: dict[str, Any] | None) -> list[str]:
    return [f"{key}: {value}" for key, value in (mapping or {}).items() if SECRET.search(str(value))]


def _secrets_a_job_sees(workflow: dict[str, Any], job: dict[str, Any]) -> list[str]:
    seen = _secret_values(workflow.get("env")) + _secret_values(job.get("env"))
    for step in job.get("steps", []):
        seen += _secret_values(step.get("env")) + _secret_values(step.get("with"))
        seen += [f"run: {line}" for line in str(step.get("run", "")).splitlines() if SECRET.search(line)]
    return seen


def _environment(job: dict[str, Any]) -> str | None:
    environment = job.get("environment")
    return environment.get("name") if isinstance(environment, dict) else environment


def _uses(step: dict[str, Any]) -> str:
    return str(step.get("uses", "")).split("@")[0]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_no_secret_is_given_to_the_whole_workflow(path: Path) -> None:
    assert _secret_values(_load(path).get("env")) == [], f"{path.name}: workflow-level env holds a secret"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_only_a_job_in_an_environment_sees_a_secret(path: Path) -> None:
    # Environment secrets reach a job only after the environment's protection rules pass
    # (docs.github.com/actions/reference/deployments-and-environments). A secret outside an
    # environment would be a repository secret: any branch's workflow could read it unreviewed.
    workflow = _load(path)
    for job_id, job in workflow["jobs"].items():
        seen = _secrets_a_job_sees(workflow, job)
        assert not seen or _environment(job), f"{path.name} {job_id} sees {seen} outside an environment"


def test_the_tests_before_a_deployment_see_no_token() -> None:
    workflow = _load(DEPLOY)
    assert _secrets_a_job_sees(workflow, workflow["jobs"]["tests"]) == []


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_secrets_reach_the_pulumi_steps_only(path: Path) -> None:
    # Not the job: `pip install` of the requirements and the policy pack's set-up run before it. The
    # steps that see a secret are the ones that run the Pulumi CLI on the state and vCenter: the
    # pulumi action, and deploy.yml's preview for the engine settings and its `recover` after a
    # failed create-only run (issue 44); none of them installs anything, and all come after every
    # step that does.
    workflow = _load(path)
    for job_id, job in workflow["jobs"].items():
        assert _secret_values(job.get("env")) == [], f"{path.name} {job_id}: job-level env holds a secret"
        steps = job.get("steps", [])
        installs = [i for i, step in enumerate(steps) if "pip install" in str(step.get("run", ""))]
        for at, step in enumerate(steps):
            if not _secret_values(step.get("env")):
                continue
            where = f"{path.name} {job_id}: {step.get('name')}"
            runs_pulumi = _uses(step) == "pulumi/actions" or re.search(r"^\s*pulumi ", str(step.get("run", "")), re.M)
            assert runs_pulumi, f"{where} sees a secret but runs no Pulumi command"
            assert "pip install" not in str(step.get("run", "")), f"{where} installs packages with secrets in reach"
            assert all(at > i for i in installs), f"{where} sees a secret before a step that installs packages"


def test_a_preview_runs_in_its_stacks_preview_environment_for_this_repositorys_pull_requests_only() -> None:
    workflow = _load(PREVIEW)
    previews = [
        (job_id, job)
        for job_id, job in workflow["jobs"].items()
        if any(_uses(step) == "pulumi/actions" for step in job.get("steps", []))
    ]
    assert previews
    for job_id, job in previews:
        # `preview-prod` carries required reviewers: prod's passphrase waits for a maintainer.
        assert _environment(job) == "preview-${{ matrix.stack }}", job_id
        assert job["strategy"]["matrix"]["stack"]
        # Fork PRs get no secrets anyway; not starting the job keeps them off the self-hosted runner.
        assert SAME_REPOSITORY in str(job.get("if", "")), job_id


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_no_workflow_runs_pull_request_code_with_the_base_repositorys_rights(path: Path) -> None:
    # pull_request_target runs with the base repository's secrets and a write token.
    assert "pull_request_target" not in _load(path)["on"]


def test_the_offline_plan_sees_no_secret_and_runs_for_every_pull_request() -> None:
    # plan.yml (the PR's copy) asks; plan-comment.yml (the default branch's) plans, forks' PRs included.
    # A review plans again (an approval may accept a rebuild): pull_request_review runs the PR's copy
    # with a fork's read-only token and no secret, as pull_request does (never pull_request_target).
    assert set(_load(WORKFLOWS / "plan.yml")["on"]) == {"pull_request", "pull_request_review"}
    workflow = _load(WORKFLOWS / "plan-comment.yml")
    plans = [
        (job_id, job)
        for job_id, job in workflow["jobs"].items()
        if any("scripts/plan_comment.py render" in str(step.get("run", "")) for step in job.get("steps", []))
    ]
    assert plans
    for job_id, job in plans:
        assert _secrets_a_job_sees(workflow, job) == [], job_id
        assert _environment(job) is None, job_id
        assert SAME_REPOSITORY not in str(job.get("if", "")), f"{job_id}: fork PRs get the offline plan too"
        assert job["runs-on"] == "ubuntu-latest", f"{job_id}: never the runner beside vCenter"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_checkout_does_not_keep_its_token(path: Path) -> None:
    # actions/checkout persists the token for later git commands unless told not to (its README).
    checkouts = [
        (job_id, step)
        for job_id, job in _jobs(path)
        for step in job.get("steps", [])
        if _uses(step) == "actions/checkout"
    ]
    assert checkouts or path.name == "plan.yml"  # plan.yml checks nothing out
    for job_id, step in checkouts:
        assert (step.get("with") or {}).get("persist-credentials") is False, f"{path.name} {job_id}"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_permissions_are_granted_per_job_and_write_only_where_needed(path: Path) -> None:
    workflow = _load(path)
    assert workflow.get("permissions") == {}, f"{path.name}: the workflow grants nothing; each job asks"
    for job_id, job in workflow["jobs"].items():
        permissions = job.get("permissions")
        assert isinstance(permissions, dict), f"{path.name} {job_id}: no permissions block"
        writes = {scope for scope, level in permissions.items() if level == "write"}
        uses_oidc = any(_uses(step).startswith(OIDC_ACTIONS) for step in job.get("steps", []))
        comments = any(
            (step.get("with") or {}).get("comment-on-pr") is True or "gh api" in str(step.get("run", ""))
            for step in job.get("steps", [])
        )
        allowed = {"pull-requests"} if comments else set()
        # The `plan verdict` commit status (plan-comment.yml): set by the default branch's code only.
        allowed |= (
            {"statuses"} if any("/statuses/" in str(step.get("run", "")) for step in job.get("steps", [])) else set()
        )
        allowed |= {"id-token"} if uses_oidc else set()
        assert writes <= allowed, f"{path.name} {job_id}: writes {sorted(writes - allowed)}"


@pytest.mark.parametrize("path", [PREVIEW, DEPLOY], ids=lambda p: p.name)
def test_pulumi_cloud_tokens_are_short_lived_where_the_environment_sets_it_up(path: Path) -> None:
    # pulumi/auth-actions exchanges the job's GitHub OIDC token for a Pulumi Cloud team token; the
    # team comes from the environment's own variable, so preview-prod's token is preview-prod's.
    for job_id, job in _jobs(path):
        steps = job.get("steps", [])
        pulumi = [i for i, step in enumerate(steps) if _uses(step) == "pulumi/actions"]
        if not pulumi:
            continue
        (oidc_at,) = [i for i, step in enumerate(steps) if _uses(step) == "pulumi/auth-actions"]
        oidc = steps[oidc_at]
        assert oidc_at < pulumi[0] and oidc["id"] == "oidc", job_id
        assert oidc["if"] == "vars.PULUMI_OIDC_TEAM != ''"
        assert oidc["with"]["requested-token-type"] == "urn:pulumi:token-type:access_token:team"
        assert oidc["with"]["scope"] == "team:${{ vars.PULUMI_OIDC_TEAM }}"
        assert oidc["with"]["export-environment-variables"] is False  # to the pulumi step only
        for step in steps:
            token = (step.get("env") or {}).get("PULUMI_ACCESS_TOKEN")
            if token is not None:  # every step that reaches Pulumi Cloud: the up, and deploy.yml's preview and recover
                assert token.startswith("${{ steps.oidc.outputs.pulumi-access-token || "), (job_id, step.get("name"))
        assert job["permissions"].get("id-token") == "write"


def test_each_deployment_runs_in_its_own_environment() -> None:
    """One job per stack, in the environment named after it: the stack's credentials and nothing else."""
    workflow = _load(DEPLOY)
    deploying = {
        job_id: job
        for job_id, job in workflow["jobs"].items()
        if any("pulumi up" in str(step.get("run", "")) for step in job.get("steps", []))
    }
    assert set(deploying) == {"up"}, set(deploying)
    job = deploying["up"]
    assert _environment(job) == "${{ matrix.stack }}"
    assert job["strategy"]["matrix"] == {"stack": "${{ fromJSON(needs.order.outputs.stacks) }}"}
    (up,) = [s for s in job["steps"] if "pulumi up" in str(s.get("run", ""))]
    assert 'pulumi up --stack "$STACK"' in up["run"] and job["env"]["STACK"] == "${{ matrix.stack }}"  # the environment's


def test_the_credential_table_names_every_job() -> None:
    doc = (PROJECT / "docs" / "deploy.md").read_text()
    assert "## Who sees which secret" in doc
    section = doc.split("## Who sees which secret", 1)[1].split("\n## ", 1)[0]
    for path in ALL:
        for job_id, _ in _jobs(path):
            assert f"`{path.name}` `{job_id}`" in section, f"docs/deploy.md: no row for {path.name} {job_id}"
