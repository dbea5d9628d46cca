"""The workflows' shape, read as data (fast): what issue 53 item 10 and issue 55 item 1 changed.

- no job names a stack: previews, the PR verdict and deployments are the same for any stack
  (their runs on a site's own repository: tests/workflow/test_site_stacks.py);
- a rebuild is accepted by an approving review of someone else with write access, never by the PR's
  own description (the step's run: tests/workflow/test_plan_comment_reviews.py).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[2]
WORKFLOWS = PROJECT / ".github" / "workflows"
COMMENT_WORKFLOW = WORKFLOWS / "plan-comment.yml"
PLAN_WORKFLOW = WORKFLOWS / "plan.yml"
LINE = "accept-rebuild: dev kubernetes.podCidr"


def _load(name: str) -> dict[str, Any]:
    document = yaml.safe_load((WORKFLOWS / name).read_text())
    if True in document:
        document["on"] = document.pop(True)
    return dict(document)


def _pr_data_step() -> dict[str, Any]:
    (job,) = _load("plan-comment.yml")["jobs"].values()
    (step,) = [s for s in job["steps"] if s.get("id") == "pr-data"]
    return dict(step)


def _plan_comment() -> Any:
    spec = importlib.util.spec_from_file_location("plan_comment", PROJECT / "scripts" / "plan_comment.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _review(user: str, **change: str) -> dict[str, Any]:
    return {"user": user, "state": "APPROVED", "commit_id": "c2", "body": LINE, "permission": "write", **change}


def test_an_approval_of_the_planned_commit_by_a_writer_counts() -> None:
    assert LINE in _plan_comment().accepting_reviews([_review("maintainer")], "author", "c2")


@pytest.mark.parametrize(
    "review",
    [
        _review("Author"),  # logins compare without case, as GitHub's do
        _review("maintainer", permission="read"),
        _review("maintainer", commit_id="c1"),
        _review("maintainer", state="CHANGES_REQUESTED"),
    ],
)
def test_no_other_review_counts(review: dict[str, Any]) -> None:
    assert _plan_comment().accepting_reviews([review], "author", "c2") == ""


def test_the_description_accepts_nothing() -> None:
    run = _pr_data_step()["run"]
    assert ".body" not in run.split("/reviews")[0], "the PR's description must not be read for accepted rebuilds"


def test_a_review_plans_again() -> None:
    document = yaml.safe_load(PLAN_WORKFLOW.read_text())
    on = document.get("on", document.get(True))
    assert on["pull_request_review"]["types"] == ["submitted", "dismissed"]
    comment = yaml.safe_load(COMMENT_WORKFLOW.read_text())
    (job,) = comment["jobs"].values()
    assert "pull_request_review" in job["if"]


@pytest.mark.parametrize("workflow", sorted(p.name for p in WORKFLOWS.glob("*.yml")))
def test_no_job_names_a_stack(workflow: str) -> None:
    """Permissions, environments and runner labels are the same for any stack: no job or step
    outside comments names one of ours (the environments come from the matrix of the stacks)."""
    document = _load(workflow)
    text = yaml.safe_dump(document["jobs"])
    for stack in ("dev", "staging", "prod"):
        assert not re.search(rf"(?<![\w./-]){stack}(?![\w-])", text), (workflow, stack)
    environments = {
        str(job.get("environment")) for job in document["jobs"].values() if job.get("environment") is not None
    }
    assert environments <= {"${{ matrix.stack }}", "preview-${{ matrix.stack }}"}, environments


def test_the_environments_and_runners_are_the_ones_documented() -> None:
    up = _load("deploy.yml")["jobs"]["up"]
    assert up["environment"] == "${{ matrix.stack }}"
    assert "vars.PULUMI_DEPLOY_RUNNER_LABELS" in str(up["runs-on"])
    assert up["permissions"] == {"contents": "read", "id-token": "write"}
    preview = _load("preview.yml")["jobs"]["preview"]
    assert preview["environment"] == "preview-${{ matrix.stack }}"
    assert "vars.PULUMI_PREVIEW_RUNNER_LABELS" in str(preview["runs-on"])
    assert preview["permissions"] == {"contents": "read", "id-token": "write"}
