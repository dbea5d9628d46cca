"""The GitHub Actions workflows: valid against the workflow schema, and doing what docs/environments.md says."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.workflow.scratch_git import git

PROJECT = Path(__file__).resolve().parents[2]
WORKFLOWS = PROJECT / ".github" / "workflows"
PREVIEW, DEPLOY = WORKFLOWS / "preview.yml", WORKFLOWS / "deploy.yml"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"
SECRETS = ("PULUMI_ACCESS_TOKEN", "VSPHERE_SERVER", "VSPHERE_USER", "VSPHERE_PASSWORD")
# owner/repo[/path]@vMAJOR[.MINOR[.PATCH]] or a full commit sha; never a branch.
PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@(v\d+(\.\d+){0,2}|[0-9a-f]{40})$")


def _load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    # YAML 1.1 (PyYAML) reads the key `on` as the boolean True.
    if True in document:
        document["on"] = document.pop(True)
    return document


def _steps(workflow: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def _runs_pulumi(step: dict[str, Any]) -> bool:
    """A step that runs a Pulumi command against the stack: pulumi/actions with a `command`, or a
    `run:` of `pulumi up` (deploy.yml, which interrupts its own run: issue 52). The action that only
    installs the CLI is not one."""
    if str(step.get("uses", "")).startswith("pulumi/actions@"):
        return bool((step.get("with") or {}).get("command"))
    return bool(re.search(r"\bpulumi (up|preview)\b", str(step.get("run", ""))))


def _pulumi_steps(workflow: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per job, its last step that runs Pulumi (deploy.yml: the up after the engine step's preview)."""
    found = {job_id: step for job_id, step in _steps(workflow) if _runs_pulumi(step)}
    assert found, "no step runs pulumi"
    return found


def _effective_env(workflow: dict[str, Any], job_id: str, step: dict[str, Any]) -> dict[str, str]:
    return {**workflow.get("env", {}), **workflow["jobs"][job_id].get("env", {}), **step.get("env", {})}


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs", [])
    return [needs] if isinstance(needs, str) else list(needs)


def _ancestors(workflow: dict[str, Any], job_id: str) -> set[str]:
    seen: set[str] = set()
    todo = _needs(workflow["jobs"][job_id])
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo += _needs(workflow["jobs"][current])
    return seen


# ---------------------------------------------------------------------------------------------
# Schema


@pytest.fixture(scope="module")
def check_jsonschema() -> Path:
    if not CHECK_JSONSCHEMA.exists():
        pytest.fail(f"{CHECK_JSONSCHEMA} is missing: `pip install -r requirements-dev.txt` (check-jsonschema)")
    return CHECK_JSONSCHEMA


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.yml")), ids=lambda p: p.name)
def test_workflow_matches_the_github_workflow_schema(check_jsonschema: Path, path: Path) -> None:
    # The schema ships inside check-jsonschema: no network needed.
    result = subprocess.run(
        [str(check_jsonschema), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_does_reject_a_broken_workflow(check_jsonschema: Path, tmp_path: Path) -> None:
    broken = _load(DEPLOY)
    broken["jobs"]["up"]["needs"] = {"order": True}  # needs is a string or a list
    broken["jobs"]["order"]["runs-on-typo"] = "ubuntu-latest"
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(broken))
    result = subprocess.run(
        [str(check_jsonschema), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "Schema validation errors" in result.stdout + result.stderr


# ---------------------------------------------------------------------------------------------
# Preview on pull requests


def test_preview_runs_on_pull_requests_after_the_tests() -> None:
    workflow = _load(PREVIEW)
    assert "pull_request" in workflow["on"]
    tests = workflow["jobs"]["tests"]
    assert any("bash scripts/setup.sh && bash scripts/test.sh" in step.get("run", "") for step in tests["steps"])
    for job_id in _pulumi_steps(workflow):
        assert "tests" in _ancestors(workflow, job_id), f"{job_id} must wait for the tests"


def test_preview_output_goes_below_the_stacks_plan_comment() -> None:
    workflow = _load(PREVIEW)
    ((job_id, step),) = _pulumi_steps(workflow).items()
    job = workflow["jobs"][job_id]
    assert step["uses"].startswith("pulumi/actions@")  # the pin and its runtime: test_action_runtimes.py
    inputs = step["with"]
    assert inputs["command"] == "preview"
    assert inputs["stack-name"] == "${{ matrix.stack }}"
    assert inputs["diff"] is True
    assert inputs["work-dir"] == "."
    assert inputs["policyPacks"] == "${{ steps.policy.outputs.packs }}"
    # No comment of its own: plan-comment.yml puts the output under the stack's plan comment, so
    # the job that runs the PR's code with credentials cannot write to the PR.
    assert inputs["comment-on-pr"] is False
    assert job["permissions"] == {"contents": "read", "id-token": "write"}  # id-token: the OIDC step
    (outcome,) = [s for s in job["steps"] if s.get("name") == "Keep the outcome for the comment"]
    assert outcome["env"] == {"OUTCOME": "${{ steps.preview.outcome }}"}
    (keep,) = [s for s in job["steps"] if s.get("name") == "Keep the output for the comment"]
    assert keep["env"] == {"OUTPUT": "${{ steps.preview.outputs.output }}"}
    assert keep["continue-on-error"] is True  # an output too long for the environment stays in the log
    assert step["id"] == "preview"
    (upload,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "pulumi-preview-${{ matrix.stack }}"
    assert upload["if"] == keep["if"] == "${{ !cancelled() }}"  # a failed preview is shown too
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.changes.outputs.stacks) }}"
    assert job["strategy"]["fail-fast"] is False
    assert "changes" in _needs(job)
    assert workflow["concurrency"]["group"] == "preview-${{ github.event.pull_request.number }}"
    assert workflow["concurrency"]["cancel-in-progress"] is True
    assert workflow["permissions"] == {}  # per job (test_credentials.py)


def _pick_step(path: Path) -> dict[str, Any]:
    steps = [step for _, step in _steps(_load(path)) if step.get("id") == "pick"]
    assert len(steps) == 1
    return steps[0]


def test_preview_and_plan_pick_stacks_with_the_tested_script() -> None:
    step = _pick_step(PREVIEW)
    assert 'json="$(bash scripts/pick_stacks.sh)"' in step["run"]
    assert 'echo "stacks=$json" >> "$GITHUB_OUTPUT"' in step["run"]
    assert step["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    assert step["env"]["HEAD_SHA"] == "${{ github.event.pull_request.head.sha }}"
    assert "INCLUDE_DELETED" not in step["env"]  # a preview has nothing to run for a deleted stack file
    # The plan (plan-comment.yml, the default branch's copy) covers a deleted stack file too.
    (plan,) = [step for _, step in _steps(_load(WORKFLOWS / "plan-comment.yml")) if step.get("id") == "plan"]
    assert 'stacks="$(INCLUDE_DELETED=1 bash scripts/pick_stacks.sh)"' in plan["run"]
    assert plan["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git(tmp_path, "init", "-q", "-b", "main")
    for name in (
        "Pulumi.yaml",
        "Pulumi.dev.yaml",
        "Pulumi.staging.yaml",
        "Pulumi.prod.yaml",
        "Pulumi.sim.yaml",
        "README.md",
    ):
        (tmp_path / name).write_text(f"{name}\n")
    for folder in ("stacks", "components/vsphere", "docs", "policy"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "x.py").write_text("x = 1\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "base")
    return tmp_path


def _stacks_for(repo: Path, change: dict[str, str | None], *, include_deleted: bool = False) -> list[str]:
    base = git(repo, "rev-parse", "HEAD")
    for name, text in change.items():
        path = repo / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "change", "--allow-empty")
    env = {"PATH": "/usr/bin:/bin", "BASE_SHA": base, "HEAD_SHA": git(repo, "rev-parse", "HEAD")}
    if include_deleted:
        env["INCLUDE_DELETED"] = "1"
    result = subprocess.run(
        ["bash", str(PROJECT / "scripts" / "pick_stacks.sh")],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return list(json.loads(result.stdout))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"Pulumi.staging.yaml": "changed\n"}, ["staging"]),
        ({"Pulumi.staging.yaml": "changed\n", "Pulumi.prod.yaml": "changed\n"}, ["prod", "staging"]),
        ({"README.md": "docs only\n", "docs/x.py": "y = 2\n"}, []),
        ({"stacks/x.py": "x = 2\n"}, ["dev", "prod", "staging"]),
        ({"components/vsphere/x.py": "x = 2\n"}, ["dev", "prod", "staging"]),
        ({"__main__.py": "pass\n"}, ["dev", "prod", "staging"]),
        ({"requirements.txt": "pulumi==3\n"}, ["dev", "prod", "staging"]),
        ({"Pulumi.yaml": "name: x\n"}, ["dev", "prod", "staging"]),
        ({"policy/x.py": "x = 2\n"}, ["dev", "prod", "staging"]),
        ({"Pulumi.qa.yaml": "new stack\n"}, ["qa"]),
        # The simulator's stack has no vCenter in CI (scripts/simulator.sh serves it on 127.0.0.1).
        ({"Pulumi.sim.yaml": "changed\n"}, []),
        ({"Pulumi.dev.yaml": None}, []),  # a deleted stack has nothing to preview
        ({"Pulumi.$(touch pwned).yaml": "x\n"}, []),  # names that are not plain never reach a shell
    ],
)
def test_preview_picks_the_stacks_a_change_affects(
    repo: Path, change: dict[str, str | None], expected: list[str]
) -> None:
    assert _stacks_for(repo, change) == expected
    assert not (repo / "pwned").exists()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"Pulumi.dev.yaml": None}, ["dev"]),  # the plan comment says the stack file is deleted
        ({"Pulumi.dev.yaml": None, "Pulumi.prod.yaml": "changed\n"}, ["dev", "prod"]),
        ({"Pulumi.sim.yaml": None}, []),
        ({"stacks/x.py": "x = 2\n", "Pulumi.staging.yaml": None}, ["dev", "prod", "staging"]),
    ],
)
def test_the_plan_workflow_also_picks_deleted_stack_files(
    repo: Path, change: dict[str, str | None], expected: list[str]
) -> None:
    assert _stacks_for(repo, change, include_deleted=True) == expected


# ---------------------------------------------------------------------------------------------
# Deploy on main


def test_deploy_runs_the_promotion_order_on_main() -> None:
    """One `up` job per stack of .github/deploy-order, one at a time in its order, after the tests;
    a failure cancels the stacks after it (GitHub: fail-fast cancels the matrix's queued jobs)."""
    workflow = _load(DEPLOY)
    assert workflow["on"]["push"]["branches"] == ["main"]
    assert "pull_request" not in workflow["on"]
    assert _needs(workflow["jobs"]["order"]) == ["tests"]
    assert _ancestors(workflow, "up") == {"tests", "order"}
    up = workflow["jobs"]["up"]
    assert up["strategy"] == {
        "max-parallel": 1,
        "fail-fast": True,
        "matrix": {"stack": "${{ fromJSON(needs.order.outputs.stacks) }}"},
    }
    assert up["environment"] == "${{ matrix.stack }}"  # required reviewers live on prod's environment
    (step,) = [s for s in up["steps"] if re.search(r"\bpulumi up\b", str(s.get("run", "")))]
    command = " ".join(step["run"].replace("\\\n", " ").split())
    assert 'pulumi up --stack "$STACK"' in command and up["env"]["STACK"] == "${{ matrix.stack }}"
    assert "--policy-pack policy" in command
    assert '${POLICY_CONFIG:+--policy-pack-config "$POLICY_CONFIG"}' in command
    assert step["env"]["POLICY_CONFIG"] == "${{ steps.policy.outputs.configs }}"
    (policy,) = [s for s in up["steps"] if s.get("id") == "policy"]
    assert 'policy/policy-config.$STACK.json' in policy["run"]  # prod's protection config, by its name
    assert (PROJECT / "policy" / "policy-config.prod.json").exists()
    assert (PROJECT / "policy" / "PulumiPolicy.yaml").exists(), "deploy runs the policy pack under policy/"
    assert workflow["concurrency"]["cancel-in-progress"] is False  # never stop an `up` halfway
    (order,) = [s for s in workflow["jobs"]["order"]["steps"] if s.get("id") == "order"]
    assert "python3 stacks/environment/deploy_order.py" in order["run"]


# ---------------------------------------------------------------------------------------------
# Both: secrets, pins, no script injection


@pytest.mark.parametrize("path", [PREVIEW, DEPLOY], ids=lambda p: p.name)
def test_pulumi_steps_get_every_credential_from_secrets(path: Path) -> None:
    workflow = _load(path)
    for job_id, step in _pulumi_steps(workflow).items():
        env = _effective_env(workflow, job_id, step)
        for name in SECRETS:
            expected = f"${{{{ secrets.{name} }}}}"
            if name == "PULUMI_ACCESS_TOKEN":  # the short-lived OIDC token first, where set up
                expected = "${{ steps.oidc.outputs.pulumi-access-token || secrets.PULUMI_ACCESS_TOKEN }}"
            assert env.get(name) == expected, f"{path.name} {job_id}: {name}"


@pytest.mark.parametrize("path", [PREVIEW, DEPLOY], ids=lambda p: p.name)
def test_no_credential_is_written_as_a_literal(path: Path) -> None:
    workflow = _load(path)
    secret_like = re.compile(r"TOKEN|PASSWORD|SECRET|USER|SERVER|KEY", re.IGNORECASE)
    secret_expression = re.compile(
        r"^\$\{\{ (steps\.oidc\.outputs\.pulumi-access-token \|\| )?secrets\.[A-Z0-9_]+ \}\}$"
    )
    maps = [workflow.get("env", {})]
    for job in workflow["jobs"].values():
        maps.append(job.get("env", {}))
        for step in job.get("steps", []):
            maps += [step.get("env", {}), step.get("with", {})]
    for mapping in maps:
        for key, value in mapping.items():
            # pulumi/auth-actions' inputs that name the kind of token and its lifetime, not a credential.
            if secret_like.search(key) and key not in ("requested-token-type", "token-expiration"):
                assert secret_expression.match(str(value)), f"{path.name}: {key} = {value!r}"
    assert "secrets." not in "".join(str(step.get("run", "")) for _, step in _steps(workflow))


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.yml")), ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_version(path: Path) -> None:
    uses = [str(step["uses"]) for _, step in _steps(_load(path)) if "uses" in step]
    assert uses or path.name == "plan.yml"  # plan.yml only asks plan-comment.yml for the plan
    for ref in uses:
        assert ref.startswith("./") or PINNED.match(ref), f"{path.name}: {ref} is not pinned to a version"


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.yml")), ids=lambda p: p.name)
def test_run_scripts_take_untrusted_values_through_env(path: Path) -> None:
    # `${{ }}` inside `run:` is pasted into the script before bash parses it: a stack or branch
    # name would become code. Such values travel through `env:` and are quoted as "$VAR".
    for job_id, step in _steps(_load(path)):
        script = str(step.get("run", ""))
        assert "${{" not in script, f"{path.name} {job_id}: {script!r}"


# ---------------------------------------------------------------------------------------------
# On premises: a runner next to vCenter, a self-managed state backend

# Previews and deployments each have their runners (tests/workflow/test_runners.py).
RUNNER_VARIABLES = {"preview.yml": "PULUMI_PREVIEW_RUNNER_LABELS", "deploy.yml": "PULUMI_DEPLOY_RUNNER_LABELS"}
STATE_SECRETS = {
    "AWS_ACCESS_KEY_ID": "STATE_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY": "STATE_SECRET_ACCESS_KEY",
    "PULUMI_CONFIG_PASSPHRASE": "PULUMI_CONFIG_PASSPHRASE",
}


def _evaluate_runs_on(expression: str, *, variable: str, labels: str | None, same_repo: bool) -> Any:
    """Evaluate the few GitHub expression forms our `runs-on` uses, as the runner service would."""
    inner = expression.strip()
    assert inner.startswith("${{") and inner.endswith("}}"), expression
    text = inner[3:-2].strip()
    same = "github.event.pull_request.head.repo.full_name == github.repository"
    fallback = f"fromJSON(vars.{variable} || '[\"ubuntu-latest\"]')"
    chosen = json.loads(labels) if labels else ["ubuntu-latest"]
    if text == fallback:
        return chosen
    assert text == f"{same} && {fallback} || 'ubuntu-latest'", text
    return chosen if same_repo else "ubuntu-latest"


@pytest.mark.parametrize("path", [PREVIEW, DEPLOY], ids=lambda p: p.name)
def test_jobs_that_reach_vcenter_run_where_the_repository_variable_says(path: Path) -> None:
    workflow = _load(path)
    variable = RUNNER_VARIABLES[path.name]
    for job_id in _pulumi_steps(workflow):
        runs_on = str(workflow["jobs"][job_id]["runs-on"])
        assert f"vars.{variable}" in runs_on, f"{path.name} {job_id}: {runs_on}"
        labels = '["self-hosted", "vcenter-lab"]'
        chosen = _evaluate_runs_on(runs_on, variable=variable, labels=labels, same_repo=True)
        assert chosen == ["self-hosted", "vcenter-lab"]
        assert _evaluate_runs_on(runs_on, variable=variable, labels=None, same_repo=True) == ["ubuntu-latest"]


def test_a_forks_pull_request_never_reaches_a_self_hosted_runner() -> None:
    workflow = _load(PREVIEW)
    variable = RUNNER_VARIABLES["preview.yml"]
    for job_id, job in workflow["jobs"].items():
        runs_on = str(job["runs-on"])
        if variable in runs_on:
            labels = '["self-hosted"]'
            chosen = _evaluate_runs_on(runs_on, variable=variable, labels=labels, same_repo=False)
            assert chosen == "ubuntu-latest", job_id


@pytest.mark.parametrize("path", [PREVIEW, DEPLOY], ids=lambda p: p.name)
def test_pulumi_steps_use_the_configured_state_backend(path: Path) -> None:
    workflow = _load(path)
    for job_id, step in _pulumi_steps(workflow).items():
        if "uses" in step:
            # pulumi/actions logs in to `cloud-url`; empty means Pulumi Cloud (its action.yml default).
            assert step["with"]["cloud-url"] == "${{ vars.PULUMI_BACKEND_URL }}", f"{path.name} {job_id}"
        else:
            # A `run:` of the CLI uses the login of the job's engine step: the same variable.
            (engine,) = [s for s in workflow["jobs"][job_id]["steps"] if s.get("id") == "engine"]
            assert engine["env"]["PULUMI_BACKEND_URL"] == "${{ vars.PULUMI_BACKEND_URL }}", f"{path.name} {job_id}"
            assert 'pulumi login "$PULUMI_BACKEND_URL"' in engine["run"], f"{path.name} {job_id}"
        env = _effective_env(workflow, job_id, step)
        for variable, secret in STATE_SECRETS.items():
            assert env.get(variable) == f"${{{{ secrets.{secret} }}}}", f"{path.name} {job_id}: {variable}"


def test_the_backend_and_runner_settings_are_documented() -> None:
    doc = (PROJECT / "docs" / "environments.md").read_text()
    for name in (*RUNNER_VARIABLES.values(), "PULUMI_BACKEND_URL", *STATE_SECRETS.values(), "s3://"):
        assert name in doc, name


def test_project_file_carries_no_empty_template_tag() -> None:
    project = yaml.safe_load((PROJECT / "Pulumi.yaml").read_text())
    tags = (project.get("config") or {}).get("pulumi:tags", {}).get("value", {})
    assert all(value for value in tags.values()), tags
