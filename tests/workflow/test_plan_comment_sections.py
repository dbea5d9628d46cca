"""The plan section of the pull request's comment is made inert like the preview's (issue 51 item 9).

`plan_comment.py collect` builds each stack's comment from a finished run's artifacts. The plan
section is rendered by the default branch's code, but it quotes the pull request's stack files
(keys, values, node names), which the PR's author wrote: a `@user` there would notify, a URL would
link, a bidirectional override would make the text read other than it is. Only the preview section
was tested, whose text `inert` cleans before `merge` sees it; here the plan section goes through
`collect` in-process (the script is standard library only, imported from its file), so the fast
tier holds `merge`'s own cleaning. tests/workflow/test_plan_comment.py runs the script as the
workflow does."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "plan_comment.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_comment_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and annotations look their module up
    spec.loader.exec_module(module)
    return module


def test_the_plan_section_cannot_mention_link_or_hide_text(tmp_path: Path) -> None:
    script = _script()
    artifacts = tmp_path / "artifacts" / "plan-dev"
    artifacts.mkdir(parents=True)
    quoted = (
        "**Verdict: rolls 1 node**\n"
        "- gpuWorkers.nodes[0].name: `gpu-1` -> `cc @octocat @org/maintainers`\n"
        "- mirror.files: https://evil.example/pwn\n"
        "- jobs.namespace: `a\u202eb`\n"
    )
    (artifacts / "section.md").write_text(quoted)
    comments = tmp_path / "comments.jsonl"
    comments.write_text(json.dumps({"id": 1, "user": "someone", "body": "hi"}) + "\n")
    (line,) = script.collect("plan", tmp_path / "artifacts", comments, tmp_path / "out")
    body = Path(line.split()[1]).read_text()
    assert "**Verdict: rolls 1 node**" in body
    assert "@octocat" not in body and "@org/maintainers" not in body  # no one is notified
    assert f"@{script.ZWSP}octocat" in body  # still readable
    assert "https://evil.example" not in body and f"https:{script.ZWSP}//evil.example/pwn" in body  # no link
    assert "\u202e" not in body  # nothing reversed
