#!/usr/bin/env python3
"""The pull request's comment per stack: what the change does to the running cluster (issue 35).

The workflow only calls this and posts its output (`.github/workflows/plan-comment.yml` renders
with the default branch's code and posts; issue 40); everything it decides is here, where tests run it.

    render   STACK's plan section: `python -m stacks plan STACK --against` the stack file at the
             PR's base, as Markdown, with the rebuilds an approving review accepts. Exit status 1
             when the change is refused, a workload will not run, or the stack file is invalid.
    reviews  the text of the reviews that may accept a rebuild (`accept-rebuild:` lines): approvals
             of the planned commit by someone with write access who did not open the PR.
    collect  for a finished plan or preview run, each stack's whole comment: a hidden marker,
             then the plan section, then the `pulumi preview` section (each run replaces its own
             section and keeps the other), and which existing comment it replaces.

Standard library only: it runs in the posting workflow, which runs no code of the PR. `render`
runs the plan with the interpreter it is given (the default branch's locked virtualenv).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

STACK_NAME = re.compile(r"^[a-z0-9][-a-z0-9]*$")
# A line of an approving review: `accept-rebuild: STACK KEY` (the same KEY as plan's --accept-rebuild).
ACCEPT_LINE = re.compile(
    r"^[ \t]*accept-rebuild:[ \t]*(?P<stack>[a-z0-9][-a-z0-9]*)[ \t]+(?P<key>[A-Za-z0-9_.\[\]-]+)[ \t]*$",
    re.MULTILINE,
)
VERDICT_PREFIX = "**Verdict:"
SECTIONS = ("plan", "preview")
# GitHub refuses a comment over 65536 characters; the preview output is cut well before that.
PREVIEW_LIMIT = 40000


def marker(stack: str) -> str:
    return f"<!-- gpucluster-plan:{stack} -->"


def _section_marks(section: str) -> tuple[str, str]:
    return f"<!-- gpucluster-plan-section:{section} -->", f"<!-- /gpucluster-plan-section:{section} -->"


def checked_stack(name: str) -> str:
    if not STACK_NAME.match(name):
        raise SystemExit(f"plan_comment: {name!r} is not a stack name (lower-case letters, digits, '-')")
    return name


def accepted_keys(description: str, stack: str) -> list[str]:
    """The keys `description` (the accepting reviews' text, `reviews`) accepts a rebuild of, for this stack only."""
    return sorted({m["key"] for m in ACCEPT_LINE.finditer(description or "") if m["stack"] == stack})


# Who may accept a rebuild: write access (GitHub's collaborator permission), never the PR's author.
WRITERS = frozenset({"admin", "maintain", "write"})


def accepting_reviews(reviews: list[dict[str, object]], author: str, head_sha: str) -> str:
    """The text of the reviews that may accept a rebuild (issue 53 item 10: the PR's own
    description, which its author writes, accepted its author's rebuilds). A review counts when it
    approves (`state` APPROVED), approves the commit being planned (`commit_id`: an approval of
    an earlier push does not carry over to what was pushed after it), and comes from someone with
    write access (`permission`, from the collaborator permission API) who is not the author."""
    texts = [
        str(review.get("body") or "")
        for review in reviews
        if review.get("state") == "APPROVED"
        and review.get("commit_id") == head_sha
        and review.get("permission") in WRITERS
        and str(review.get("user") or "").lower() != author.lower()
    ]
    return "\n".join(texts) + ("\n" if texts else "")


def _way_out(stack: str, body: str) -> str:
    # The items of the plan's "To go ahead with a refused change" list.
    keys = sorted(set(re.findall(r"^- `--accept-rebuild ([^`]+)`:", body, re.MULTILINE)))
    if not keys:
        return ""
    lines = "\n".join(f"    accept-rebuild: {stack} {key}" for key in keys)
    return (
        "\n**This check fails until the rebuild is a reviewed decision.** Once its safe procedure is done or "
        "planned, someone with write access to the repository who did not open this pull request approves it "
        "with a review whose text holds (the check runs again on each review):\n\n"
        f"{lines}\n"
    )


def render(
    stack: str, base: Path | None, head: Path | None, description: str, python: str, out: Path
) -> tuple[str, int]:
    """The plan section and the exit status (0: the change may go ahead; 1: it may not as it is)."""
    if head is None:
        return (
            f"### `plan {stack}`: the stack file is deleted\n\n"
            f"{VERDICT_PREFIX} stack file deleted** — the workflows never destroy a stack: its VMs keep running "
            f"until someone runs `pulumi destroy --stack {stack}` (docs/environments.md).\n",
            0,
        )
    command = [python, "-m", "stacks", "plan", stack, "--file", str(head), "--out", str(out), "--format", "markdown"]
    if base is not None:
        command += ["--against", str(base)]
        for key in accepted_keys(description, stack):
            command += ["--accept-rebuild", key]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if VERDICT_PREFIX in result.stdout:
        body = result.stdout
        return body + _way_out(stack, body), 0 if result.returncode == 0 else 1
    problems = inert((result.stderr or result.stdout).strip())
    return (
        f"### `plan {stack}`: nothing could be planned\n\n"
        f"{VERDICT_PREFIX} plan failed** — a stack file is invalid, or an `accept-rebuild:` line of the "
        "description names no refused change; fix these:\n\n"
        f"```\n{problems}\n```\n",
        1,
    )


# Characters that make text read other than it is: bidirectional overrides and isolates (the
# "Trojan Source" ones), and control characters but tab and newline.
_DECEPTIVE = re.compile(r"[\u202a-\u202e\u2066-\u2069\u200e\u200f\x00-\x08\x0b-\x1f\x7f]")
# GitHub notifies `@user` and `@org/team` and links `scheme://...` and `www.` in comment text; a
# zero-width space after `@`, inside `://` and after `www` keeps the text readable and makes it
# neither. A Markdown link needs `](` with nothing between: `[x](//host)` has no scheme for the
# filter above to catch (issue 53 item 5), so the pair is split too.
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*):(?=//)")
_WWW = re.compile(r"(?i)\b(www)\.")
_LINK_TARGET = re.compile(r"\]\(")
_OUR_MARK = re.compile(r"<!--\s*/?\s*gpucluster-plan[^>]*-->")
ZWSP = "\u200b"
FENCE = "```"
# What stands where a neutralised character or mark was. Replaced, never deleted: deleting can
# join what stood on either side into something new (`` `<!-- gpucluster-plan -->` `` became a
# fence when the mark was cut out after the fences had been replaced; issue 53 item 5).
_REMOVED_CHAR = "\ufffd"
_REMOVED_MARK = "(marker removed)"


def _neutral_once(text: str, *, fences: bool) -> str:
    text = _OUR_MARK.sub(_REMOVED_MARK, text)
    text = _DECEPTIVE.sub(_REMOVED_CHAR, text)
    text = _MENTION.sub("@" + ZWSP, text)
    text = _SCHEME.sub(lambda m: m[1] + ":" + ZWSP, text)
    text = _WWW.sub(lambda m: m[1] + ZWSP + ".", text)
    text = _LINK_TARGET.sub("]" + ZWSP + "(", text)
    return text.replace(FENCE, "'''") if fences else text


def _neutral(text: str, *, fences: bool) -> str:
    """Every rule applied again until the text no longer changes: no rule can then undo another."""
    while True:
        changed = _neutral_once(text, fences=fences)
        if changed == text:
            return text
        text = changed


def inert(text: str) -> str:
    """Text a pull request may have written, made inert for a comment: it notifies no one, links
    nothing, hides nothing and forges none of our marks; no fence of ours is closed by it (only a
    line of three or more backticks closes ours, and no three backticks remain)."""
    return _neutral(text, fences=True)


def preview_section(output: str, outcome: str) -> str:
    """The preview's output comes from the pull request's own run, whose code wrote it: fenced,
    inert and labelled as such. Only `outcome` (one of OUTCOMES) is ours to state."""
    text = inert(output)
    if len(text) > PREVIEW_LIMIT:
        text = text[:PREVIEW_LIMIT] + "\n... (cut; the whole output is in the workflow run's log)"
    return (
        f"### `pulumi preview` ({outcome})\n\n"
        "<details><summary>Output of the pull request's own run: not checked, its code wrote it</summary>\n\n"
        f"```text\n{text.strip()}\n```\n\n</details>\n"
    )


def merge(stack: str, existing: str, section: str, text: str) -> str:
    """The whole comment: the marker, then each section, `section` replaced by `text`."""
    # The plan section is ours (plan-comment.yml renders it with the base branch's code) but quotes
    # the PR's stack files; the preview section is the PR's run's. Neither may mention or link.
    # Its own fences stay (the plan's failure block); nothing here deletes a character, so nothing
    # here can join backticks into a new one.
    text = _neutral(text, fences=False)
    parts = {}
    for name in SECTIONS:
        start, end = _section_marks(name)
        match = re.search(re.escape(start) + r"\n(.*?)" + re.escape(end), existing or "", re.DOTALL)
        parts[name] = match[1] if match else ""
    parts[section] = text if text.endswith("\n") else text + "\n"
    if not parts["preview"]:
        parts["preview"] = (
            '### `pulumi preview`\n\nNot run (yet): it needs the stack\'s credentials (docs/deploy.md, "Who sees which secret").\n'
        )
    body = [marker(stack)]
    for name in SECTIONS:
        start, end = _section_marks(name)
        body += [start, parts[name].rstrip("\n"), end]
    return "\n".join(body) + "\n"


OUTCOMES = ("success", "failure", "cancelled", "skipped")
BOT = "github-actions[bot]"


def existing_comment(comments: list[dict[str, object]], stack: str) -> tuple[str, str]:
    """The id and body of our comment for `stack` (one the workflow token wrote), or ("new", "")."""
    for comment in comments:
        body = str(comment.get("body") or "")
        if comment.get("user") == BOT and body.startswith(marker(stack)):
            return str(comment["id"]), body
    return "new", ""


def sections_of_run(workflow: str, artifacts: Path) -> list[tuple[str, str, str]]:
    """(stack, section, text) for each stack the finished run left an artifact for."""
    prefix, section = {"plan": ("plan-", "plan"), "preview": ("pulumi-preview-", "preview")}.get(workflow, ("", ""))
    found = []
    for folder in sorted(artifacts.glob(f"{prefix}*")) if prefix else []:
        stack = folder.name.removeprefix(prefix)
        if not folder.is_dir() or not STACK_NAME.match(stack):
            print(f"plan_comment: skipped artifact {folder.name!r}: not a stack's", file=sys.stderr)
            continue
        if section == "plan":
            text_file = folder / "section.md"
            if not text_file.is_file():
                continue
            text = text_file.read_text()
        else:
            output = folder / "output.txt"
            outcome_file = folder / "outcome"
            outcome = outcome_file.read_text().strip() if outcome_file.is_file() else ""
            outcome = outcome if outcome in OUTCOMES else "unknown"
            text = preview_section(output.read_text() if output.is_file() else "", outcome)
        found.append((stack, section, text))
    return found


def collect(workflow: str, artifacts: Path, comments_file: Path, out: Path) -> list[str]:
    """Writes each stack's whole comment under `out` and `out/index`: `ID-or-new PATH` per line."""
    comments = [json.loads(line) for line in comments_file.read_text().splitlines() if line.strip()]
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for stack, section, text in sections_of_run(workflow, artifacts):
        comment_id, body = existing_comment(comments, stack)
        path = out / f"{stack}.md"
        path.write_text(merge(stack, body, section, text))
        index.append(f"{comment_id} {path}")
    (out / "index").write_text("".join(f"{line}\n" for line in index))
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    r = commands.add_parser("render", help="one stack's plan section (in the PR's run, no secret)")
    r.add_argument("--stack", required=True)
    r.add_argument("--base", default="", help="the stack file at the PR's base; empty: the PR adds the stack")
    r.add_argument("--head", default="", help="the stack file in the PR; missing: the PR deletes it")
    r.add_argument("--description-env", default="PR_BODY", help="environment variable holding the PR description")
    r.add_argument("--python", default=sys.executable, help="the interpreter that has the project installed")
    r.add_argument("--out", required=True, type=Path, help="folder: section.md and the plan's files under plan/")
    v = commands.add_parser("reviews", help="the text of the reviews that may accept a rebuild")
    v.add_argument("--reviews", required=True, type=Path, help="one JSON object a line: user, state, commit_id, body")
    v.add_argument("--permissions", required=True, type=Path, help="`LOGIN PERMISSION` a line (the collaborator API's)")
    v.add_argument("--author", required=True, help="the pull request's author (login)")
    v.add_argument("--head", required=True, help="the commit being planned")
    c = commands.add_parser("collect", help="the whole comments to post for a finished run (in plan-comment.yml)")
    c.add_argument("--workflow", required=True, help="the finished run's workflow: plan or preview")
    c.add_argument("--artifacts", required=True, type=Path, help="the run's artifacts, one folder each")
    c.add_argument("--comments", required=True, type=Path, help="the PR's comments, one JSON object a line")
    c.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    if args.command == "reviews":
        lines = args.reviews.read_text().splitlines() if args.reviews.is_file() else []
        granted = args.permissions.read_text().split("\n") if args.permissions.is_file() else []
        permissions = dict(line.split(" ", 1) for line in granted if " " in line)
        reviews = [json.loads(line) for line in lines if line.strip()]
        for review in reviews:
            review["permission"] = permissions.get(str(review.get("user")), "none")
        print(accepting_reviews(reviews, args.author, args.head), end="")
        return 0
    if args.command == "collect":
        for line in collect(args.workflow, args.artifacts, args.comments, args.out):
            print(line)
        return 0
    stack = checked_stack(args.stack)
    head = Path(args.head) if args.head and Path(args.head).is_file() else None
    base = Path(args.base) if args.base else None
    args.out.mkdir(parents=True, exist_ok=True)
    text, status = render(stack, base, head, os.environ.get(args.description_env, ""), args.python, args.out / "plan")
    (args.out / "section.md").write_text(text)
    print(text, end="")
    return status


if __name__ == "__main__":
    sys.exit(main())
