"""The connected side's run: the plan first, every artifact, and `bundle.json` last.

`bundle.json` is the mark of a complete fetch: it is written only when every step succeeded, with
the SHA-256 of each file and the digest of each image (stacks.tools.bundle.integrity), so a fetch
that stops (no network, a missing image, Ctrl-C) leaves a folder `bundle load` refuses, naming
what is missing from the plan (`bundle.plan.json`, written first and removed at the end)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from stacks.tools.bundle.contents import BundleContents
from stacks.tools.bundle.integrity import record
from stacks.tools.bundle.steps import Step, execute, fetch_steps

MANIFEST = "bundle.json"
PLAN = "bundle.plan.json"


def fetch_into(
    contents: BundleContents, out: Path, *, lock: Path, log: Callable[[str], None]
) -> tuple[list[Step], list[str]]:
    """Fetch everything `contents` names into `out`: (the steps, each failure). `bundle.json`
    exists afterwards only when there was no failure."""
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)  # a folder fetched before is incomplete until this fetch ends
    (out / PLAN).write_text(json.dumps(contents.to_json(), indent=2) + "\n")
    shutil.copyfile(lock, out / contents.requirements)
    steps = fetch_steps(contents, out)
    failures = execute(steps, log=log)
    if not failures:
        (out / MANIFEST).write_text(json.dumps(record(contents, out).to_json(), indent=2) + "\n")
        (out / PLAN).unlink()
    return steps, failures


def missing_from_plan(bundle: Path) -> list[str]:
    """What an interrupted fetch (a plan, no bundle.json) lacks: `what (path)` each."""
    plan = BundleContents.from_json(json.loads((bundle / PLAN).read_text()))
    planned = [
        *((f"image {i.source}", i.archive) for i in plan.images),
        *((f"file {f.dest}", f.path) for f in plan.files),
        *((f"plugin {p.name} {p.version}", p.path) for p in plan.plugins),
    ]
    missing = [f"{what} ({path})" for what, path in planned if not (bundle / path).is_file()]
    if not (bundle / plan.wheels).is_dir():
        missing.append(f"the wheels ({plan.wheels}/)")
    return missing
