"""Issue 55 item 1: the workflows serve a site's own stacks, not ours.

A copy of the repository as a site makes it: dev, staging and prod removed, two stacks of its own
(`lab-west`, `lab-east`) added, and its promotion order in .github/deploy-order (west first, not
the alphabet's order). The workflows' own steps run there, as the runner runs them (bash, the
step's `run:` and its environment), and must find:
- deployments for exactly those stacks, in the declared order (deploy.yml's `order` job);
- previews for exactly those stacks (preview.yml's `changes` job);
- the PR verdict for exactly those stacks (plan-comment.yml's plan step, the default branch's code);
and no job's permissions, environment or runner labels may name a stack: they are the same for
any stack the repository holds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.stack_fixtures import fixture_text
from tests.workflow.scratch_git import git

PROJECT = Path(__file__).resolve().parents[2]
WORKFLOWS = PROJECT / ".github" / "workflows"
SITE_STACKS = {"lab-west": "staging", "lab-east": "prod"}  # the site's stack: the fixture it starts from
ORDER = "# the site's promotion order\nlab-west\n\nlab-east  # after west\n"


def _load(name: str) -> dict[str, Any]:
    document = yaml.safe_load((WORKFLOWS / name).read_text())
    if True in document:
        document["on"] = document.pop(True)
    return dict(document)


def _step(workflow: str, job: str, step_id: str) -> dict[str, Any]:
    (step,) = [s for s in _load(workflow)["jobs"][job]["steps"] if s.get("id") == step_id]
    return dict(step)


def _site_stack(name: str, source: str) -> str:
    # The fixture renamed to the site's stack; its names, switch and addresses stay distinct per stack.
    return fixture_text(source).replace(f"name: {source}\n", f"name: {name}\n", 1)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The site's repository: base = its stacks; head = a pull request touching code every stack runs."""
    repo = tmp_path_factory.mktemp("site") / "repo"
    shutil.copytree(PROJECT / ".github", repo / ".github")
    (repo / ".github" / "deploy-order").write_text(ORDER)
    shutil.copytree(PROJECT / "scripts", repo / "scripts")
    (repo / "stacks" / "environment").mkdir(parents=True)
    shutil.copy(PROJECT / "stacks" / "environment" / "deploy_order.py", repo / "stacks" / "environment")
    shutil.copy(PROJECT / "Pulumi.yaml", repo / "Pulumi.yaml")
    for name, source in SITE_STACKS.items():
        (repo / f"Pulumi.{name}.yaml").write_text(_site_stack(name, source))
    (repo / "Pulumi.sim.yaml").write_text(fixture_text("sim"))  # kept: the simulator's, never deployed
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the site's own stacks")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "components").mkdir()
    (repo / "components" / "touched.py").write_text("x = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a change every stack runs")
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", base)  # what the workflows' checkout leaves for plan-comment.yml
    return {"repo": repo, "base": base, "head": head}


def _run_step(repo: Path, step: dict[str, Any], env: dict[str, str], tmp: Path) -> dict[str, str]:
    """A `run:` step as GitHub runs it (`bash -e {0}`), its GITHUB_OUTPUT read back."""
    output = tmp / "github-output"
    output.write_text("")
    full = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "GITHUB_OUTPUT": str(output), **env}
    subprocess.run(["bash", "-e", "-c", step["run"]], cwd=repo, env=full, check=True, timeout=600)
    return dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)


def test_deployments_are_exactly_the_sites_stacks_in_its_order(site: dict[str, Any], tmp_path: Path) -> None:
    outputs = _run_step(site["repo"], _step("deploy.yml", "order", "order"), {}, tmp_path)
    assert json.loads(outputs["stacks"]) == ["lab-west", "lab-east"]


def test_a_listed_stack_without_its_file_stops_the_deployment(site: dict[str, Any], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(site["repo"], repo, symlinks=True)
    (repo / ".github" / "deploy-order").write_text("lab-west\nprod\nlab-west\n")
    with pytest.raises(subprocess.CalledProcessError):
        _run_step(repo, _step("deploy.yml", "order", "order"), {}, tmp_path)
    result = subprocess.run(
        [sys.executable, "stacks/environment/deploy_order.py"], cwd=repo, capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    assert "deploy-order:2: prod has no stack file Pulumi.prod.yaml" in result.stderr
    assert "deploy-order:3: lab-west is listed twice" in result.stderr


def test_previews_are_exactly_the_sites_stacks(site: dict[str, Any], tmp_path: Path) -> None:
    env = {"BASE_SHA": site["base"], "HEAD_SHA": site["head"]}
    outputs = _run_step(site["repo"], _step("preview.yml", "changes", "pick"), env, tmp_path)
    assert sorted(json.loads(outputs["stacks"])) == ["lab-east", "lab-west"]  # never sim, never ours


def test_the_pr_verdict_covers_exactly_the_sites_stacks(site: dict[str, Any], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(site["repo"], repo, symlinks=True)
    shutil.rmtree(repo / "scripts")
    (repo / "scripts").symlink_to(PROJECT / "scripts")  # the default branch's code, as in test_plan_comment
    (repo / ".venv").symlink_to(PROJECT / ".venv")
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    (tmp_path / "description.txt").write_text("")
    env = {
        "PYTHONPATH": str(PROJECT),
        "RUNNER_TEMP": str(runner_temp),
        "BASE_SHA": site["base"],
        "HEAD_SHA": site["head"],
        "DESCRIPTION_FILE": str(tmp_path / "description.txt"),
    }
    step = _step("plan-comment.yml", next(iter(_load("plan-comment.yml")["jobs"])), "plan")
    outputs = _run_step(repo, step, env, tmp_path)
    assert outputs["refused"] == ""  # a code change rolls nothing
    artifacts = sorted(p.name for p in (runner_temp / "plan-comment" / "artifacts").iterdir())
    assert artifacts == ["plan-lab-east", "plan-lab-west"]
    for name in SITE_STACKS:
        section = (runner_temp / "plan-comment" / "artifacts" / f"plan-{name}" / "section.md").read_text()
        assert section.startswith(f"### `plan {name} --against` the base branch"), section
        assert "**Verdict:" in section
