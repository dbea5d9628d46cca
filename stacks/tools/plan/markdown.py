"""`plan --format markdown`: what a change does to the running cluster, as a pull request comment.

Rendered from the same document `plan --json` prints, so both say the same thing. The top lines
are what a reviewer decides on: the verdict (refused / rolls N nodes / in place / no change), per
changed key what the running environment does with it, which nodes roll and how many are down at
once, the change's estimated duration, and the workloads the admission check says will not run.
The details (why each node changes, the safe procedures, notes) follow in folded sections.
No path or time stamp appears: the same change renders the same text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from stacks.environment.day_two.check import ACCEPT_FLAG
from stacks.tools.plan.deploy_time.words import about, format_seconds

_DISRUPTED = ("replaced", "rebooted", "power-cycled", "removed")
VERDICT_PREFIX = "**Verdict:"
"""Every rendering has exactly one line starting with this (scripts read it)."""


def _cell(text: object) -> str:
    """One Markdown table cell or list item: no line breaks, no column separators, and no HTML. The
    text quotes the pull request's stack files (keys, values, reasons); GitHub renders the tags it
    allows in a comment (`</details>` closes our fold, `<a href>` links), so `<` is written as an
    entity, which GitHub shows as the character it stands for (issue 53 item 5)."""
    return str(text).replace("\r", " ").replace("\n", " ").replace("|", "\\|").replace("<", "&lt;")


def _code(text: object) -> str:
    return "`" + _cell(text).replace("`", "'") + "`"


def _short_node(name: str) -> str:
    return name.removeprefix("gpu-workers-").removeprefix("control-plane-")


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _down(n: int) -> str:
    return "no node goes down" if n == 0 else f"at most {n} down at once"


def _duration(rolling: Mapping[str, Any]) -> str:
    """`about 3 minutes (2m30s)`: the rounded words and the figure the text plan prints."""
    return f"{about(rolling['seconds'])} ({format_seconds(rolling['seconds'])})"


def _breakdown(rolling: Mapping[str, Any]) -> str:
    """What the time is made of: the text plan's `rolling change:` line after its summary."""
    words = str(rolling.get("inWords", ""))
    return words.split("(not the fresh deployment's): ", 1)[1] if "(not the fresh deployment's): " in words else ""


_WHY_BY_VERDICT = {
    "added": "a new VM: cloned, boots and joins the cluster; no running node is touched",
    "removed": "drained first (PodDisruptionBudgets honoured), then its VM is deleted",
}
"""The Why of a node whose change carries no input diff of its own (it is all new, or all gone)."""

_STATE_IT = re.compile(r"[.;]?\s*State it with `[^`]*`\.?\s*$")


def _procedure(text: str) -> str:
    """A refused key's procedure without its closing "State it with `--accept-rebuild KEY`": the
    bullet it goes into starts with that flag already."""
    return _STATE_IT.sub("", text)


def _key_verdict(key: Mapping[str, Any], rolled: int) -> str:
    if key["refused"]:
        return f"**refused**: {key['happens']}"
    if key["accepted"]:
        return f"rebuild accepted ({ACCEPT_FLAG} {key['key']}): {key['happens']}"
    cls = key["class"]
    if cls == "rolls-nodes":
        return f"rolls {_count(rolled, 'node')}" if rolled else "rolls the nodes (none in this plan)"
    if cls == "in-place":
        return "in place"
    if cls == "no-effect-on-existing":
        return "no effect on running nodes (first-boot data only)"
    return str(key["happens"])


def _verdict(against: Mapping[str, Any], disrupted: Sequence[str], added: Sequence[str]) -> str:
    keys = against["keys"]
    refused = sorted({k["key"] for k in keys if k["refused"]})
    if refused:
        return (
            f"{VERDICT_PREFIX} refused** — {_count(len(refused), 'change')} a live cluster cannot take safely: "
            + ", ".join(map(_code, refused))
        )
    rolls = (
        f"rolls {_count(len(disrupted), 'node')}** ({', '.join(map(_short_node, disrupted))}), "
        f"{_down(against['downAtOnce'])}, {_duration(against['rollingChange'])}"
    )
    accepted = sorted({k["key"] for k in keys if k["accepted"]})
    if accepted:
        stated = ", ".join(map(_code, accepted))
        return f"{VERDICT_PREFIX} rebuild accepted** for {stated}" + (
            f"; {rolls}".replace("**", "") if disrupted else ""
        )
    if disrupted:
        return f"{VERDICT_PREFIX} {rolls}"
    if added:
        return f"{VERDICT_PREFIX} adds {_count(len(added), 'node')}** ({', '.join(map(_short_node, added))}); no running node is disturbed"
    if keys:
        return f"{VERDICT_PREFIX} in place** — no node is replaced, rebooted or removed"
    return f"{VERDICT_PREFIX} no change to the running cluster**"


def render_markdown(document: Mapping[str, Any]) -> str:
    """The comment body for one stack: `document` is what `plan --json` prints."""
    stack = document["stack"]
    admission = document["admission"]
    failed = [v for v in admission["verdicts"] if v["status"] == "FAIL"]
    against = document.get("against")
    out: list[str] = []
    if against is None:
        out += [
            f"### `plan {stack}`: a new stack",
            "",
            f"{VERDICT_PREFIX} new stack** — `pulumi up` creates {document['resources']} resources, "
            f"{document['deployment']['inWords']}",
        ]
    else:
        nodes: Mapping[str, Mapping[str, Any]] = against["nodes"]
        disrupted = [n for n, c in nodes.items() if c["verdict"] in _DISRUPTED]
        added = [n for n, c in nodes.items() if c["verdict"] == "added"]
        out += [f"### `plan {stack} --against` the base branch", "", _verdict(against, disrupted, added)]
        if against["keys"]:
            out += ["", "| Changed key | Change | What the running cluster does |", "|---|---|---|"]
            rolled = sum(1 for c in nodes.values() if c["verdict"] == "replaced")
            for key in against["keys"]:
                out.append(f"| {_code(key['path'])} | {_cell(key['change'])} | {_cell(_key_verdict(key, rolled))} |")
        changed = {n: c for n, c in nodes.items() if c["verdict"] != "unchanged"}
        if changed:
            rolling = against["rollingChange"]
            breakdown = _breakdown(rolling)
            out += [
                "",
                f"**Nodes**: {len(changed)} of {len(nodes)} change, {_down(against['downAtOnce'])}; "
                f"{_duration(rolling)}" + (f": {_cell(breakdown)}." if breakdown else "."),
                "",
                "| Node | What happens | Why |",
                "|---|---|---|",
            ]
            for name, change in changed.items():
                why = "; ".join(change["reasons"]) or _WHY_BY_VERDICT.get(change["verdict"], "")
                out.append(f"| {_code(name)} | {change['verdict']} | {_cell(why)} |")
        elif against["keys"]:
            out += [
                "",
                f"**Nodes**: none of {len(nodes)} change: `pulumi up` replaces, reboots, adds and removes no VM "
                "(what it does change is in the table above).",
            ]
        if against.get("workloads"):
            out += ["", "**Kubernetes objects** `pulumi up` changes:"]
            out += [f"- {_cell(line)}" for line in against["workloads"]]
    out.append("")
    if failed:
        out.append(f"**Workloads that will not run** (admission check): {_count(len(failed), 'workload')}")
        out += [f"- {_code(v['workload'])}: {_cell(v['detail'])}" for v in failed]
    else:
        out.append("**Admission**: every workload runs where it is meant to.")
    if against is not None:
        refused = [k for k in against["keys"] if k["refused"]]
        if refused:
            out += ["", "**To go ahead with a refused change**, do or plan its safe procedure, then state the rebuild:"]
            out += [f"- `{ACCEPT_FLAG} {k['key']}`: {_cell(_procedure(k['procedure']))}" for k in refused]
        # A refused key's procedure is listed above already.
        details = [
            f"- {_code(k['path'])}: {_cell(k['happens']).rstrip('.')}. Safe procedure: {_cell(k['procedure'])}"
            for k in against["keys"]
            if not k["refused"]
        ]
        details += [f"- {_cell(note)}" for note in against["notes"]]
        if details:
            out += [
                "",
                "<details><summary>What happens, the safe procedures, notes</summary>",
                "",
                *details,
                "",
                "</details>",
            ]
    return "\n".join(out) + "\n"
