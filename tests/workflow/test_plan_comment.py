"""Issue 35: the pull request says what the change does to the running cluster.

- `plan --against --format markdown` is compared with golden files made from real stack-file
  changes (tests/workflow/plan_comments/; scripts/regenerate-plan-comment-goldens.sh rewrites them
  by hand, never this test);
- the plan workflow's own script step runs here, on a base and a head stack file in a scratch git
  repository, as the runner would run it (not the runner): its comment's verdict line and its exit
  status for a rolling change, a refused change, an accepted rebuild, a no-op, an added and a
  deleted stack file;
- the posting step's logic (`plan_comment.py collect`) keeps one comment per stack, found by its
  marker, replaces only its own section, and trusts nothing in the artifacts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks.cli import main as stacks_main
from tests.workflow.scratch_git import git

PROJECT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "plan_comments"
PLAN_WORKFLOW = PROJECT / ".github" / "workflows" / "plan.yml"
COMMENT_WORKFLOW = PROJECT / ".github" / "workflows" / "plan-comment.yml"
SCRIPT = PROJECT / "scripts" / "plan_comment.py"
CASES = ["scale-out", "scale-out-two", "template-change", "version-upgrade", "pod-cidr-change"]


def _load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    if True in document:
        document["on"] = document.pop(True)
    return document


def _verdict(text: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith("**Verdict:")]
    return line


# ---------------------------------------------------------------------------------------------
# plan --format markdown, against golden files


@pytest.mark.parametrize("case", CASES)
def test_plan_markdown_matches_its_golden_file(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head, expected = GOLDEN / f"{case}.yaml", GOLDEN / f"{case}.md"
    argv = ["plan", "dev", "--file", str(head), "--against", str(GOLDEN / "base.yaml")]
    status = stacks_main([*argv, "--out", str(tmp_path), "--format", "markdown"])
    rendered = capsys.readouterr().out
    assert rendered == expected.read_text(), (
        f"{expected.name} differs from what plan prints now; if the change is meant, run "
        "scripts/regenerate-plan-comment-goldens.sh and review its diff"
    )
    assert status == (2 if "**Verdict: refused**" in rendered else 0)


def test_the_golden_files_say_what_each_change_does() -> None:
    # The goldens themselves are checked for the facts a reviewer reads first.
    verdicts = {case: _verdict((GOLDEN / f"{case}.md").read_text()) for case in CASES}
    assert verdicts["scale-out"].startswith("**Verdict: adds 1 node** (worker-5)")
    assert verdicts["scale-out-two"].startswith("**Verdict: adds 2 nodes** (worker-5, worker-6)")
    assert verdicts["template-change"].startswith("**Verdict: rolls 4 nodes** (worker-1, worker-2, worker-3, worker-4)")
    assert "1 down at once, about " in verdicts["template-change"]
    assert verdicts["version-upgrade"].startswith("**Verdict: refused**")
    assert "`kubernetes.version`" in verdicts["version-upgrade"]
    assert verdicts["pod-cidr-change"].startswith("**Verdict: refused**")
    refused = (GOLDEN / "pod-cidr-change.md").read_text()
    assert "- `--accept-rebuild kubernetes.podCidr`: keep the old value, or migrate" in refused
    assert "| `kubernetes.podCidr` | 10.244.0.0/16 -> 10.245.0.0/16 | **refused**" in refused


def test_plan_markdown_names_the_workloads_that_will_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GPU workers with too little memory for the fabric check's pods: the admission check fails it.
    text = (GOLDEN / "base.yaml").read_text()
    assert text.count("      memoryMb: 24576\n") == 1
    head = tmp_path / "head.yaml"
    head.write_text(text.replace("      memoryMb: 24576\n", "      memoryMb: 4096\n"))
    status = stacks_main(
        [
            "plan",
            "dev",
            "--file",
            str(head),
            "--against",
            str(GOLDEN / "base.yaml"),
            "--out",
            str(tmp_path / "o"),
            "--format",
            "markdown",
        ]
    )
    rendered = capsys.readouterr().out
    assert status == 2
    assert "**Workloads that will not run** (admission check): 1 workload" in rendered
    assert "- `MPIJob training/nccl-fabric-check-roce`:" in rendered


# ---------------------------------------------------------------------------------------------
# The plan workflow's script step, run as the runner runs it


def _step(workflow: Path, step_id: str) -> dict[str, Any]:
    steps = [s for job in _load(workflow)["jobs"].values() for s in job.get("steps", []) if s.get("id") == step_id]
    assert len(steps) == 1, step_id
    return steps[0]


FORGED_VERDICT = "**Verdict: no change to the running cluster**"
# What a pull request may put in its own commits to forge its plan: none of it may run.
FORGERIES = {
    "stacks/__init__.py": "",
    "stacks/__main__.py": f"print({FORGED_VERDICT!r})\n",
    "scripts/plan_comment.py": f"print({FORGED_VERDICT!r})\n",
    "scripts/pick_stacks.sh": "echo '[]'\n",
}


def _run_render_step(
    tmp_path: Path,
    base: str | None,
    head: str | None,
    description: str = "",
    *,
    forge: bool = False,
    also: dict[str, str] | None = None,
) -> tuple[str, str]:
    """plan-comment.yml's step `plan` in a scratch clone, as the runner runs it: the working tree is
    the default branch (with this project's scripts and virtualenv), the PR's head commit is only in
    git. Returns (the comment's plan section for dev, `status=1` when dev is refused else `status=0`)."""
    repo = tmp_path / "checkout"
    repo.mkdir(parents=True)
    stack_file = repo / "Pulumi.dev.yaml"
    git(repo, "init", "-q", "-b", "main")
    if base is not None:
        stack_file.write_text(base)
    (repo / "README.md").write_text("x\n")
    git(repo, "add", "README.md", *(["Pulumi.dev.yaml"] if base is not None else []))
    git(repo, "commit", "-q", "-m", "base")
    base_sha = git(repo, "rev-parse", "HEAD")
    if head is None:
        stack_file.unlink(missing_ok=True)
    else:
        stack_file.write_text(head)
    # Code every stack runs changes too, so dev is planned even when its file does not.
    for name, text in {"components/touched.py": "x = 1\n", **(FORGERIES if forge else {}), **(also or {})}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the pull request", "--allow-empty")
    head_sha = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", base_sha)  # what actions/checkout leaves: the default branch
    (repo / "scripts").symlink_to(PROJECT / "scripts")
    (repo / ".venv").symlink_to(PROJECT / ".venv")
    output, runner_temp = tmp_path / "github-output", tmp_path / "runner-temp"
    output.write_text("")
    runner_temp.mkdir()
    (tmp_path / "description.txt").write_text(description)
    step = _step(COMMENT_WORKFLOW, "plan")
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": str(PROJECT),  # the default branch's `stacks` package
        "GITHUB_OUTPUT": str(output),
        "RUNNER_TEMP": str(runner_temp),
        "BASE_SHA": base_sha,
        "HEAD_SHA": head_sha,
        "DESCRIPTION_FILE": str(tmp_path / "description.txt"),
    }
    assert set(step["env"]) == {"BASE_SHA", "HEAD_SHA", "DESCRIPTION_FILE"}
    # GitHub runs `run:` with `bash -e {0}`.
    subprocess.run(["bash", "-e", "-c", step["run"]], cwd=repo, env=env, check=True, timeout=300)
    (line,) = output.read_text().splitlines()
    assert line.startswith("refused=")
    section = (runner_temp / "plan-comment" / "artifacts" / "plan-dev" / "section.md").read_text()
    return section, "status=1" if "dev" in line.removeprefix("refused=").split() else "status=0"


def _case(name: str) -> str:
    return (GOLDEN / f"{name}.yaml").read_text()


def test_a_rolling_change_says_which_nodes_roll_and_passes(tmp_path: Path) -> None:
    section, status = _run_render_step(tmp_path, _case("base"), _case("template-change"))
    assert _verdict(section) == (
        "**Verdict: rolls 4 nodes** (worker-1, worker-2, worker-3, worker-4), at most 1 down at once, "
        "about 19 minutes (19m00s)"
    )
    assert status == "status=0"


def test_a_refused_change_fails_and_says_the_way_out(tmp_path: Path) -> None:
    section, status = _run_render_step(tmp_path, _case("base"), _case("pod-cidr-change"))
    assert _verdict(section).startswith("**Verdict: refused** — 1 change a live cluster cannot take safely")
    assert status == "status=1"
    assert "\n    accept-rebuild: dev kubernetes.podCidr\n" in section
    # The posting job turns that into the failed commit status `plan verdict` of the PR's head.
    (job,) = _load(COMMENT_WORKFLOW)["jobs"].values()
    (verdict,) = [step for step in job["steps"] if 'context="plan verdict"' in str(step.get("run", ""))]
    assert verdict["env"]["REFUSED"] == "${{ steps.plan.outputs.refused }}"
    assert "state=failure" in verdict["run"] and "!cancelled()" in verdict["if"]


def test_a_rebuild_stated_in_the_description_is_accepted_for_that_stack_only(tmp_path: Path) -> None:
    other = _run_render_step(
        tmp_path / "a", _case("base"), _case("pod-cidr-change"), "accept-rebuild: prod kubernetes.podCidr"
    )
    assert other[1] == "status=1"  # accepted for prod, not for dev
    section, status = _run_render_step(
        tmp_path / "b",
        _case("base"),
        _case("pod-cidr-change"),
        "Moving pods.\n\naccept-rebuild: dev kubernetes.podCidr\n",
    )
    assert _verdict(section) == "**Verdict: rebuild accepted** for `kubernetes.podCidr`"
    assert status == "status=0"
    # What `pulumi up` will do to the nodes, even when it is nothing (issue 45).
    assert "**Nodes**: none of 5 change: `pulumi up` replaces, reboots, adds and removes no VM" in section


# ---------------------------------------------------------------------------------------------
# The comment's words (issue 45): what a reviewer reads at a glance must agree with the text plan


def test_a_scale_out_of_two_workers_says_its_time_its_nodes_and_its_fabric_check() -> None:
    comment = (GOLDEN / "scale-out-two.md").read_text()
    # Two workers side by side, 2m30s each (the text plan's figure): not "about 2 minutes".
    assert "**Nodes**: 2 of 7 change, no node goes down; about 3 minutes (2m30s): " in comment
    assert "gpu-workers-worker-5 (added) takes 2m30s: linked clone 0m20s, power-on 0m10s" in comment
    assert "at most 0 down" not in comment
    for node in ("worker-5", "worker-6"):
        [row] = [line for line in comment.splitlines() if line.startswith(f"| `gpu-workers-{node}` |")]
        why = row.split("|")[3].strip()
        assert why.startswith("a new VM: cloned, boots and joins"), row
    # The fabric check runs one rank per GPU worker: its MPIJob changes with the scale out.
    assert "- MPIJob training/nccl-fabric-check-roce: Worker replicas 4 -> 6; `mpirun -np 4` -> `-np 6`" in comment


def test_a_refused_changes_bullet_names_its_flag_once() -> None:
    refused = (GOLDEN / "pod-cidr-change.md").read_text()
    for line in refused.splitlines():
        if line.startswith("- `--accept-rebuild"):
            assert line.count("--accept-rebuild") == 1, line


def _render_command(text: str) -> list[str]:
    [command] = re.findall(r"python3 scripts/plan_comment\.py render [^`\n\\]*(?:\\\n[^`\n\\]*)*", text)
    return command.replace("\\\n", " ").split()


def test_the_documented_local_command_is_the_workflows_step(tmp_path: Path) -> None:
    documented = _render_command((PROJECT / "docs" / "environments.md").read_text())
    # The plan is rendered by plan-comment.yml, with the default branch's code (issue 40 item 4).
    workflow = _render_command((PROJECT / ".github" / "workflows" / "plan-comment.yml").read_text())
    assert [a for a in documented if a.startswith("--")] == [a for a in workflow if a.startswith("--")]
    assert documented[documented.index("--python") + 1] == workflow[workflow.index("--python") + 1]
    # Run as documented (OLD and the stack file filled in): the comment is the golden one.
    filled = {
        "OLD": str(GOLDEN / "base.yaml"),
        "Pulumi.dev.yaml": str(GOLDEN / "scale-out-two.yaml"),
        ".venv/bin/python": sys.executable,
        ".plan/dev": str(tmp_path / "out"),
    }
    argv = [filled.get(arg, arg) for arg in documented[1:]]
    result = subprocess.run(
        [sys.executable, *argv],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PR_BODY": ""},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (GOLDEN / "scale-out-two.md").read_text()


def test_a_no_op_says_so(tmp_path: Path) -> None:
    section, status = _run_render_step(tmp_path, _case("base"), _case("base"))
    assert _verdict(section) == "**Verdict: no change to the running cluster**"
    assert status == "status=0"


def test_an_added_stack_file_is_planned_as_a_new_stack(tmp_path: Path) -> None:
    section, status = _run_render_step(tmp_path, None, _case("base"))
    assert _verdict(section).startswith("**Verdict: new stack** — `pulumi up` creates ")
    assert status == "status=0"


def test_a_deleted_stack_file_says_nothing_is_destroyed(tmp_path: Path) -> None:
    section, status = _run_render_step(tmp_path, _case("base"), None)
    assert _verdict(section).startswith("**Verdict: stack file deleted** — the workflows never destroy a stack")
    assert status == "status=0"


def test_a_stale_accept_line_fails_and_says_which(tmp_path: Path) -> None:
    # The rebuild was accepted, then the change was dropped: the line must go too.
    section, status = _run_render_step(tmp_path, _case("base"), _case("base"), "accept-rebuild: dev kubernetes.podCidr")
    assert _verdict(section).startswith("**Verdict: plan failed**")
    assert "--accept-rebuild kubernetes.podCidr: no refused change has this key" in section
    assert status == "status=1"


def test_an_invalid_stack_file_fails_with_its_problems(tmp_path: Path) -> None:
    broken = _case("base").replace("podCidr: 10.244.0.0/16", "podCidr: not-a-cidr")
    section, status = _run_render_step(tmp_path, _case("base"), broken)
    assert _verdict(section).startswith("**Verdict: plan failed**")
    assert "kubernetes.podCidr" in section
    assert status == "status=1"


# ---------------------------------------------------------------------------------------------
# The posting step: one comment per stack, each run its own section


def _collect(
    tmp_path: Path, workflow: str, artifacts: dict[str, dict[str, str]], comments: list[dict[str, Any]]
) -> list[str]:
    folder = tmp_path / "artifacts"
    for name, files in artifacts.items():
        for file, text in files.items():
            (folder / name).mkdir(parents=True, exist_ok=True)
            (folder / name / file).write_text(text)
    folder.mkdir(exist_ok=True)
    (tmp_path / "comments.jsonl").write_text("".join(json.dumps(c) + "\n" for c in comments))
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "collect",
            "--workflow",
            workflow,
            "--artifacts",
            str(folder),
            "--comments",
            str(tmp_path / "comments.jsonl"),
            "--out",
            str(tmp_path / "bodies"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": ""},
    )
    index = (tmp_path / "bodies" / "index").read_text().splitlines()
    assert result.stdout.splitlines() == index
    return index


def test_the_first_plan_posts_a_new_comment_per_stack(tmp_path: Path) -> None:
    index = _collect(
        tmp_path,
        "plan",
        {
            "plan-dev": {"section.md": "**Verdict: no change to the running cluster**\n"},
            "plan-prod": {"section.md": "**Verdict: refused** x\n"},
        },
        [{"id": 7, "user": "someone", "body": "<!-- gpucluster-plan:dev --> not ours"}],
    )
    assert [line.split()[0] for line in index] == ["new", "new"]  # a person's comment is never edited
    body = Path(index[0].split()[1]).read_text()
    assert body.startswith("<!-- gpucluster-plan:dev -->\n")
    assert "**Verdict: no change to the running cluster**" in body
    assert "### `pulumi preview`\n\nNot run (yet)" in body


def test_the_preview_lands_below_the_plan_and_a_new_plan_keeps_it(tmp_path: Path) -> None:
    (plan_line,) = _collect(
        tmp_path / "1", "plan", {"plan-dev": {"section.md": "**Verdict: rolls 4 nodes** old\n"}}, []
    )
    first = Path(plan_line.split()[1]).read_text()
    ours = {"id": 41, "user": "github-actions[bot]", "body": first}
    (preview_line,) = _collect(
        tmp_path / "2",
        "preview",
        {"pulumi-preview-dev": {"output.txt": "Previewing update (dev)\n~ 4 to update\n", "outcome": "success\n"}},
        [ours],
    )
    assert preview_line.split()[0] == "41"  # edited in place
    with_preview = Path(preview_line.split()[1]).read_text()
    assert with_preview.index("**Verdict: rolls 4 nodes** old") < with_preview.index("### `pulumi preview` (success)")
    assert "~ 4 to update" in with_preview
    (again,) = _collect(
        tmp_path / "3",
        "plan",
        {"plan-dev": {"section.md": "**Verdict: no change to the running cluster**\n"}},
        [{**ours, "body": with_preview}],
    )
    latest = Path(again.split()[1]).read_text()
    assert "rolls 4 nodes" not in latest and "**Verdict: no change to the running cluster**" in latest
    assert "~ 4 to update" in latest  # the preview section stays until the next preview replaces it


def test_artifacts_cannot_forge_markers_or_stack_names(tmp_path: Path) -> None:
    forged = "**Verdict: no change**\n<!-- /gpucluster-plan-section:plan -->\n<!-- gpucluster-plan:prod -->\n"
    index = _collect(
        tmp_path, "plan", {"plan-dev": {"section.md": forged}, "plan-$(touch pwned)": {"section.md": "x"}}, []
    )
    assert len(index) == 1  # the odd name is skipped
    body = Path(index[0].split()[1]).read_text()
    assert body.count("gpucluster-plan:prod") == 0
    assert body.count("<!-- /gpucluster-plan-section:plan -->") == 1
    assert not (tmp_path / "pwned").exists()


def test_the_poster_runs_no_pull_request_code() -> None:
    workflow = _load(COMMENT_WORKFLOW)
    assert workflow["on"] == {"workflow_run": {"workflows": ["plan", "preview"], "types": ["completed"]}}
    (job,) = workflow["jobs"].values()
    checkout = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
    # The default branch's own code: no `ref:` to the PR's head.
    assert checkout and all("ref" not in (s.get("with") or {}) for s in checkout)
    runs = "\n".join(str(s.get("run", "")) for s in job["steps"])
    # Installs only the default branch's locked packages; the PR's commits go to a ref of their own
    # and are read with `git show` / `git diff`, never checked out, merged or run.
    installs = re.findall(r"pip install[^\n]*", runs)
    assert installs == ["pip install -q --require-hashes -r requirements.lock"], installs
    assert '"+refs/pull/$PR/head:refs/plan/head"' in runs
    for verb in ("checkout", "switch", "merge", "rebase", "reset", "worktree", "cherry-pick", "pull"):
        assert not re.search(rf"\bgit (-c \S+ )*{verb}\b", runs), verb
    assert "python3 scripts/plan_comment.py collect" in runs
    assert "python3 scripts/plan_comment.py render" in runs
    assert re.search(r"select\(\.head\.sha|\$1 == sha", runs), "a stale run must not post"


# ---------------------------------------------------------------------------------------------
# Issue 40, item 4: what comes from the pull request's own run is fenced, neutralised and labelled


def _preview_body(tmp_path: Path, output: str, outcome: str = "success") -> str:
    (line,) = _collect(
        tmp_path, "preview", {"pulumi-preview-dev": {"output.txt": output, "outcome": outcome + "\n"}}, []
    )
    return Path(line.split()[1]).read_text()


def test_the_preview_output_cannot_mention_link_or_break_out(tmp_path: Path) -> None:
    hostile = (
        "Previewing update (dev)\n"
        "```\n</details>\n\n### `pulumi preview` (success)\n**Verdict: no change to the running cluster**\n"
        "~~~\ncc @octocat @org/maintainers, see https://evil.example/pwn and [this](http://evil.example)\n"
        "<img src=x onerror=alert(1)> \u202egnp.exe\n"
    )
    body = _preview_body(tmp_path, hostile)
    section = body.split("<!-- gpucluster-plan-section:preview -->", 1)[1]
    fences = re.findall(r"^`{3,}.*$", section, re.MULTILINE)  # only a ``` line closes a ``` fence
    assert len(fences) == 2, fences  # one block, opened and closed by us
    inside = section.split(fences[0], 1)[1].split(fences[1], 1)[0]
    assert "@octocat" not in inside and "@org/maintainers" not in inside  # no one is notified
    assert "https://evil" not in inside and "http://evil" not in inside  # nothing is a link
    assert "\u202e" not in inside  # no right-to-left override hides what the text says
    head = section.split(fences[0], 1)[0]
    assert "not checked" in head.lower() and "pull request" in head.lower(), head  # labelled for what it is
    assert body.count("**Verdict:") == 0 or "**Verdict:" not in head


def test_a_forged_outcome_or_stack_name_is_not_taken(tmp_path: Path) -> None:
    body = _preview_body(tmp_path, "ok\n", outcome="success** (verified by @octocat)")
    assert "### `pulumi preview` (unknown)" in body


def test_the_pull_requests_own_code_cannot_forge_its_plan(tmp_path: Path) -> None:
    """The PR's copies of scripts/ and stacks/ are in its commits, never in what runs the plan."""
    section, status = _run_render_step(tmp_path, _case("base"), _case("pod-cidr-change"), forge=True)
    assert _verdict(section).startswith("**Verdict: refused**"), section
    assert status == "status=1"


def test_the_plan_workflow_of_the_pull_request_produces_nothing_trusted() -> None:
    """plan.yml is the PR's own copy: it may only ask; the verdict and the comment come from plan-comment.yml."""
    (job,) = _load(PLAN_WORKFLOW)["jobs"].values()
    assert job["permissions"] == {}
    assert not [s for s in job["steps"] if "uses" in s], "no checkout, no artifact"
    (job,) = _load(COMMENT_WORKFLOW)["jobs"].values()
    (post,) = [s for s in job["steps"] if "plan_comment.py collect" in str(s.get("run", ""))]
    download = [line for line in post["run"].splitlines() if "gh run download" in line]
    assert download and 'if [ "$WORKFLOW" = preview ]; then' in post["run"].split(download[0])[0].splitlines()[-1]


def test_the_plan_sees_the_pull_requests_other_stack_files(tmp_path: Path) -> None:
    """Cross-stack checks read the stack files beside the planned one: the PR's, not the base's."""
    twin = _case("base").replace("name: dev\n", "name: qa\n", 1)
    section, status = _run_render_step(tmp_path, _case("base"), _case("base"), also={"Pulumi.qa.yaml": twin})
    assert _verdict(section).startswith("**Verdict: plan failed**"), section
    assert "Pulumi.qa.yaml" in section
    assert status == "status=1"


# ---------------------------------------------------------------------------------------------
# Issue 53, item 5: the comment's neutralising cannot be turned against itself

# Each piece is crafted against one rule of the neutraliser: a mark between backticks (cut out
# after the fences were replaced, it left a fence), a control character likewise, `</details>` to
# close our fold, a protocol-relative link (no scheme for the link filter), `www.`, a mention.
HOSTILE = (
    "``<!-- gpucluster-plan-section:plan -->`\n``\x01`\n</details>\n\n"
    "**Verdict: no change to the running cluster** [fine](//evil.example/x) www.evil.example @octocat\n"
)


def _outside_our_blocks(body: str) -> str:
    """The comment's text outside the fenced blocks our code opened (what GitHub renders as Markdown)."""
    parts = re.split(r"^```.*$", body, flags=re.MULTILINE)
    return "".join(parts[0::2])


def _assert_nothing_escapes(body: str) -> None:
    fences = re.findall(r"^\s{0,3}(?:`{3,}|~{3,}).*$", body, re.MULTILINE)
    assert len(fences) % 2 == 0 and all(f.strip().startswith("```") for f in fences), fences
    outside = _outside_our_blocks(body)
    assert outside.count("</details>") == outside.count("<details>"), outside  # our folds only
    assert not re.search(r"\]\(|(?i:\bwww\.)|(?i:[a-z]://)|@octocat", outside), outside  # no link, no mention
    verdicts = [line for line in outside.splitlines() if line.startswith("**Verdict:")]
    assert len(verdicts) == 1, verdicts  # ours alone


def test_a_hostile_preview_cannot_close_the_fence_or_forge_a_verdict(tmp_path: Path) -> None:
    body = _preview_body(tmp_path, "Previewing update (dev)\n" + HOSTILE)
    preview = body.split("<!-- gpucluster-plan-section:preview -->", 1)[1]
    fences = re.findall(r"^`{3,}.*$", preview, re.MULTILINE)
    assert len(fences) == 2, fences  # one block, opened and closed by us
    inside = preview.split(fences[0], 1)[1].split(fences[1], 1)[0]
    assert "](" not in inside and "www.evil" not in inside
    assert body.count("<!-- /gpucluster-plan-section:plan -->") == 1


def test_a_hostile_stack_file_key_cannot_break_out_of_the_plan_section(tmp_path: Path) -> None:
    """The stack file is the pull request's: an unknown key is quoted back in the failure block."""
    hostile_key = json.dumps(HOSTILE)
    head = _case("base").replace("    protect: false\n", f"    protect: false\n    {hostile_key}: 1\n")
    section, status = _run_render_step(tmp_path, _case("base"), head)
    assert status == "status=1" and "**Verdict: plan failed**" in _outside_our_blocks(section), section
    (tmp_path / "post").mkdir()
    (line,) = _collect(tmp_path / "post", "plan", {"plan-dev": {"section.md": section}}, [])
    _assert_nothing_escapes(Path(line.split()[1]).read_text())


def test_a_hostile_stack_file_value_cannot_break_out_of_the_plan_table(tmp_path: Path) -> None:
    """A value the plan quotes in its tables (the template a change moves to)."""
    value = "tpl</details><a href=//evil.example>x</a>[fine](//evil.example)"
    head = _case("base").replace("gpuTemplate: rocky9-k8s-vgpu-t4-16c", f"gpuTemplate: {json.dumps(value)}")
    section, _ = _run_render_step(tmp_path, _case("base"), head)
    assert "| `vcenter.gpuTemplate` |" in section, section  # planned, not refused as invalid
    (tmp_path / "post").mkdir()
    (line,) = _collect(tmp_path / "post", "plan", {"plan-dev": {"section.md": section}}, [])
    body = Path(line.split()[1]).read_text()
    _assert_nothing_escapes(body)
    assert "<a href" not in body
