"""Issue 53 item 10: a rebuild is accepted by someone else's approving review, never by the PR itself.

The `accept-rebuild:` line used to be read from the pull request's description, which its author
writes: the author accepted their own rebuild. Now plan-comment.yml's `pr-data` step collects the
approving reviews and `scripts/plan_comment.py reviews` keeps the text of those that approve the
commit being planned and come from someone with write access who is not the author. The step runs
here as the runner runs it (bash, its `run:` and environment), with a `gh` double that answers as
GitHub's REST API does (pulls, reviews with `state`/`commit_id`/`body`, collaborator permission)
and a real git remote holding the PR's ref.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.workflow.scratch_git import git

PROJECT = Path(__file__).resolve().parents[2]
COMMENT_WORKFLOW = PROJECT / ".github" / "workflows" / "plan-comment.yml"
PLAN_WORKFLOW = PROJECT / ".github" / "workflows" / "plan.yml"
LINE = "accept-rebuild: dev kubernetes.podCidr"

GH_DOUBLE = r'''#!/usr/bin/env python3
"""gh api as the steps call it: the answers come from $GH_FIXTURE (JSON)."""
import json, os, sys
fixture = json.load(open(os.environ["GH_FIXTURE"]))
args = [a for a in sys.argv[1:] if a != "--paginate"]
assert args[0] == "api", args
path = args[1]
jq = args[args.index("--jq") + 1] if "--jq" in args else ""
pr = fixture["pr"]
if path.endswith("/reviews"):
    approved = [r for r in fixture["reviews"] if r["state"] == "APPROVED"]
    for r in approved:
        if jq.endswith(".user.login"):
            print(r["user"]["login"])
        else:
            print(json.dumps({"user": r["user"]["login"], "state": r["state"], "commit_id": r["commit_id"], "body": r["body"]}))
elif "/collaborators/" in path:
    login = path.split("/collaborators/")[1].split("/")[0]
    if login not in fixture["permissions"]:
        print("gh: Not Found (HTTP 404)", file=sys.stderr)
        sys.exit(1)
    print(fixture["permissions"][login])
elif path.endswith(f"/pulls/{pr['number']}"):
    print({".user.login": pr["user"]["login"], ".base.sha": pr["base"]["sha"]}[jq])
else:
    sys.exit(f"gh double: no answer for {args}")
'''


def _pr_data_step() -> dict[str, Any]:
    document = yaml.safe_load(COMMENT_WORKFLOW.read_text())
    (job,) = document["jobs"].values()
    (step,) = [s for s in job["steps"] if s.get("id") == "pr-data"]
    return dict(step)


def _accepted_text(tmp_path: Path, reviews: list[dict[str, Any]], permissions: dict[str, str]) -> str:
    """Runs the pr-data step; returns the text the plan step reads as accepting its rebuilds."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "README.md").write_text("x\n")
    git(work, "add", "README.md")
    git(work, "commit", "-q", "-m", "base")
    base = git(work, "rev-parse", "HEAD")
    git(work, "commit", "-q", "--allow-empty", "-m", "the pull request")
    head = git(work, "rev-parse", "HEAD")
    git(work, "push", "-q", str(origin), f"{base}:refs/heads/main", f"{head}:refs/pull/7/head")
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(origin), str(checkout))
    (checkout / "scripts").symlink_to(PROJECT / "scripts")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(GH_DOUBLE)
    (bin_dir / "gh").chmod(0o755)
    for review in reviews:
        review["commit_id"] = head if review.get("commit_id") == "HEAD" else "0" * 40
    fixture = {
        "pr": {"number": 7, "user": {"login": "author"}, "base": {"sha": base}},
        "reviews": reviews,
        "permissions": permissions,
    }
    (tmp_path / "fixture.json").write_text(json.dumps(fixture))
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    output = tmp_path / "github-output"
    output.write_text("")
    env = {
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "GH_FIXTURE": str(tmp_path / "fixture.json"),
        "GH_TOKEN": "not-a-token",
        "REPO": "site/repo",
        "PR": "7",
        "HEAD_SHA": head,
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_OUTPUT": str(output),
    }
    step = _pr_data_step()
    assert set(step["env"]) == {"GH_TOKEN", "REPO", "PR", "HEAD_SHA"}
    subprocess.run(["bash", "-e", "-c", step["run"]], cwd=checkout, env=env, check=True, timeout=120)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return Path(outputs["description"]).read_text()


def _review(user: str, *, state: str = "APPROVED", commit: str = "HEAD", body: str = LINE) -> dict[str, Any]:
    return {"user": {"login": user}, "state": state, "commit_id": commit, "body": body}


def test_a_maintainers_approval_of_this_commit_accepts_the_rebuild(tmp_path: Path) -> None:
    text = _accepted_text(tmp_path, [_review("maintainer")], {"maintainer": "write", "author": "write"})
    assert LINE in text


@pytest.mark.parametrize(
    ("review", "permissions", "why"),
    [
        (_review("author"), {"author": "admin"}, "the PR's author approving their own rebuild"),
        (_review("reader"), {"reader": "read"}, "an approval without write access"),
        (_review("stranger"), {}, "an approval from someone who is no collaborator"),
        (_review("maintainer", commit="OLD"), {"maintainer": "write"}, "an approval of an earlier push"),
        (_review("maintainer", state="COMMENTED"), {"maintainer": "write"}, "a comment, not an approval"),
    ],
)
def test_no_other_review_accepts_a_rebuild(
    tmp_path: Path, review: dict[str, Any], permissions: dict[str, str], why: str
) -> None:
    assert LINE not in _accepted_text(tmp_path, [review], permissions), why
