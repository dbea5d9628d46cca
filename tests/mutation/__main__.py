"""Run the mutation sample (tests/mutation/sample.yaml) against a test tier.

    .venv/bin/python -m tests.mutation                 # every mutant against `pytest -m fast`
    .venv/bin/python -m tests.mutation --tier real     # ... against the real tier
    .venv/bin/python -m tests.mutation --only toolkit-floor,trainjob-port

Each mutant is applied to a fresh copy of the committed tree (`git archive HEAD`, with this
checkout's .venv and build/ linked in), and the tier runs there with `-x`: a failing run catches
the mutant. The tier runs in two steps to save time, both inside the tier: first the tier's tests
under the test folders that mirror the mutated file's package (where a catching test usually is),
then, for a mutant that survived those, the whole tier. The run ends with one line per mutant and
the catch rate; docs/tests.md records the last one.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Path(__file__).with_name("sample.yaml")


@dataclass(frozen=True)
class Mutant:
    id: str
    fix: str
    file: str
    find: str
    replace: str
    occurrence: int | None = None
    """Which occurrence of `find` to replace (1-based) where it occurs more than once on purpose."""


def load(path: Path = SAMPLE) -> list[Mutant]:
    return [Mutant(**entry) for entry in yaml.safe_load(path.read_text())]


def mutated(text: str, mutant: Mutant) -> str:
    """`text` with the mutant applied; ValueError when `find` is not where the sample says."""
    count = text.count(mutant.find)
    if mutant.occurrence is None and count != 1:
        raise ValueError(f"{mutant.id}: found {count} times in {mutant.file} (the sample is stale)")
    if mutant.occurrence is not None and count < mutant.occurrence:
        raise ValueError(f"{mutant.id}: found {count} times in {mutant.file}, not {mutant.occurrence}")
    head, *rest = text.split(mutant.find)
    n = mutant.occurrence or 1
    return head + mutant.find.join(rest[: n - 1]) + (mutant.find if n > 1 else "") + mutant.replace + mutant.find.join(rest[n - 1 :])


def near_tests(file: str) -> list[str]:
    """The test folders that mirror the mutated file's package (docs/tests.md: tests mirror packages)."""
    parts = Path(file).parts
    candidates = [Path("tests", *parts[: i]) for i in range(len(parts) - 1, 0, -1)]
    if parts[0] == ".github" or parts[0] == "scripts":
        candidates.append(Path("tests/workflow"))
    found = [str(c) for c in candidates if (ROOT / c).is_dir()]
    return found[:1] or ["tests"]


def copy_tree(into: Path) -> None:
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for shared in (".venv", "build"):
        if (ROOT / shared).exists():
            (into / shared).symlink_to((ROOT / shared).resolve())


def run_tier(tree: Path, tier: str, paths: list[str], timeout: float) -> bool:
    """True when the tier's tests under `paths` fail (the mutant is caught)."""
    command = [str(tree / ".venv/bin/python"), "-m", "pytest", "-m", tier, "-x", "-q", "-p", "no:cacheprovider", *paths]
    try:
        result = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return True  # a mutant that hangs the tier is caught: a developer sees it
    # 5: nothing collected under these paths for this tier; anything else non-zero is a failure.
    return result.returncode not in (0, 5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tier", default="fast", help="the pytest marker to run (default: fast)")
    parser.add_argument("--only", default="", help="comma-separated mutant ids")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per tier run")
    args = parser.parse_args(argv)
    mutants = load()
    if args.only:
        wanted = set(args.only.split(","))
        mutants = [m for m in mutants if m.id in wanted]
    caught = 0
    start = time.monotonic()
    for mutant in mutants:
        with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
            tree = Path(tmp)
            copy_tree(tree)
            target = tree / mutant.file
            try:
                target.write_text(mutated(target.read_text(), mutant))
            except ValueError as error:
                print(f"STALE    {mutant.id}: {error}", flush=True)
                continue
            near = near_tests(mutant.file)
            hit = run_tier(tree, args.tier, near, args.timeout)
            where = " ".join(near)
            if not hit:
                hit, where = run_tier(tree, args.tier, ["tests"], args.timeout), "tests"
            caught += hit
            print(f"{'CAUGHT' if hit else 'SURVIVED':8} {mutant.id} ({mutant.fix}) by -m {args.tier} {where}", flush=True)
        shutil.rmtree(tree, ignore_errors=True)
    print(f"mutation sample: {caught}/{len(mutants)} caught by -m {args.tier} in {time.monotonic() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
