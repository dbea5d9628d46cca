"""Scale benchmark: plan cost and deployment critical path from a few to hundreds of GPU workers.

    python -m benchmarks.scale --emit-stack N PATH
        write a stack file with N GPU workers and N GPU hosts, derived from benchmarks/reference/dev.yaml
    python -m benchmarks.scale --report [--sizes 4,64,512] [--repeat K] [--write-md]
                                        [--keep DIR [--profile]] [--json FILE]
        plan a stack of each size and, with the same resources, the bare-SDK baseline and the
        typed-SDK floor; print resource counts, wall time, peak RSS and dependency depth side by side

Every measured run is a fresh `python -m benchmarks._child` process: its peak RSS comes from
`os.wait4`, the kernel's rusage of that one child (the per-child form of
`getrusage(RUSAGE_CHILDREN)`, which would only give the maximum over all children so far).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.baseline import load_records, recorded_shape
from benchmarks.depth import longest_chain
from benchmarks.stackgen import emit_stack

PROJECT_DIR = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = PROJECT_DIR / "BENCHMARKS.md"
DEFAULT_SIZES = (4, 64, 512)
FIGURES_BEGIN = "<!-- figures:begin (python -m benchmarks.scale --report --write-md) -->"
FIGURES_END = "<!-- figures:end -->"


class ChildFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class RunFigures:
    """One measured run (plan, baseline or typed floor) of one size."""

    seconds: float
    """Wall time of the measured work: validation, program run and writing the plan."""
    program_seconds: float
    """Of which: running the program under the mock runtime."""
    process_seconds: float
    """The whole child process, interpreter start and imports included."""
    resources: int
    custom_resources: int
    peak_rss_kib: int
    rss_floor_kib: int
    """RSS once everything was imported, before the measured work started."""
    program_body_seconds: float = 0.0
    """Of the program's run: its own code, run synchronously (constructors, wiring); the rest of
    the run is the SDK registering what it declared, in the event loop."""
    collector_seconds: float = 0.0
    """Of the whole: the cyclic garbage collector (mostly the one collection after the run)."""


@dataclass(frozen=True)
class SizeFigures:
    workers: int
    plan: RunFigures
    baseline: RunFigures
    typed: RunFigures
    """The typed-SDK floor: the same resources through the provider packages' typed classes."""
    depth: int
    chain: list[str]
    baseline_identical: bool
    """Both replays registered exactly what the plan did (types, names, parents, deps, inputs,
    provider versions, source positions)."""
    median_seconds: dict[str, float] = field(default_factory=dict)
    """Per kind ("plan", "baseline", "typed"), the median wall time over the repeats: with the
    fastest runs above, it shows how far the figures move on this machine."""

    @property
    def ratio(self) -> float:
        return self.plan.seconds / self.baseline.seconds

    @property
    def typed_ratio(self) -> float:
        """Plan over the typed-SDK floor: what the program's own logic adds."""
        return self.plan.seconds / self.typed.seconds

    @property
    def median_ratio(self) -> float:
        """Plan over baseline, median over median (the fastest-run ratio's check)."""
        if not self.median_seconds:
            return self.ratio
        return self.median_seconds["plan"] / self.median_seconds["baseline"]

    @property
    def program_ratio(self) -> float:
        return self.plan.program_seconds / self.baseline.program_seconds


def run_child(mode: str, source: Path, stack: str, workdir: Path, *, profile: bool = False) -> RunFigures:
    """Run one measurement in a fresh interpreter; raise `ChildFailed` with its output if it fails."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "benchmarks._child", mode, str(source), stack, str(workdir)]
    if profile:
        command.append("--profile")
    log = workdir / f"{mode}.log"
    start = datetime.datetime.now()
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=PROJECT_DIR, stdout=out, stderr=subprocess.STDOUT)
        # wait4, not wait(): it hands back this child's own rusage (peak RSS) as it reaps it.
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    elapsed = (datetime.datetime.now() - start).total_seconds()
    if process.returncode != 0:
        output = log.read_text(encoding="utf-8", errors="replace")
        tail = output[-4000:]
        raise ChildFailed(f"{mode} run for {source} exited with {process.returncode}:\n{tail}")
    figures = json.loads((workdir / f"{mode}.json").read_text(encoding="utf-8"))
    return RunFigures(process_seconds=elapsed, peak_rss_kib=usage.ru_maxrss, **figures)


def _fastest(runs: Sequence[RunFigures]) -> RunFigures:
    """The least disturbed of repeated runs: the machine is shared, and noise only adds time."""
    return min(runs, key=lambda run: run.seconds)


def measure_size(workers: int, workdir: Path, *, repeat: int = 1, profile: bool = False) -> SizeFigures:
    """Emit, plan and replay a stack of `workers` GPU workers under `workdir`, `repeat` times each."""
    stack = f"scale{workers}"
    stack_file = emit_stack(workers, workdir / f"Pulumi.{stack}.yaml")
    records_file = workdir / "plan-records.json"
    runs: dict[str, list[RunFigures]] = {"plan": [], "baseline": [], "typed": []}
    for attempt in range(repeat):
        first = attempt == 0
        # Interleaved, so that a slow spell of the shared machine hits all three kinds alike.
        for mode in runs:
            source = stack_file if mode == "plan" else records_file
            runs[mode].append(run_child(mode, source, stack, workdir, profile=profile and first))
    records = load_records(records_file)
    shape = recorded_shape(records)
    identical = all(
        recorded_shape(load_records(workdir / f"{mode}-records.json")) == shape for mode in ("baseline", "typed")
    )
    chain = longest_chain(records)
    return SizeFigures(
        workers=workers,
        plan=_fastest(runs["plan"]),
        baseline=_fastest(runs["baseline"]),
        typed=_fastest(runs["typed"]),
        depth=len(chain),
        chain=chain,
        baseline_identical=identical,
        median_seconds={mode: statistics.median(run.seconds for run in kind) for mode, kind in runs.items()},
    )


def measure(
    sizes: Sequence[int],
    *,
    repeat: int = 1,
    keep: Path | None = None,
    profile: bool = False,
) -> list[SizeFigures]:
    results = []
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as scratch:
        root = keep if keep is not None else Path(scratch)
        for workers in sizes:
            print(f"measuring {workers} GPU workers ...", file=sys.stderr, flush=True)
            workdir = root / f"workers-{workers}"
            results.append(measure_size(workers, workdir, repeat=repeat, profile=profile))
    return results


def _mib(kib: int) -> str:
    return f"{kib / 1024:.0f}"


def figures_table(results: Sequence[SizeFigures]) -> str:
    """A Markdown table: one row per size, plan, baseline and typed floor side by side."""
    lines = [
        "| GPU workers | resources (custom) | plan s | baseline s | plan / baseline | program only: plan / baseline "
        "| typed floor s | plan / typed floor "
        "| plan peak RSS MiB (above imports) | baseline peak RSS MiB (above imports) | dependency depth |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        p, b = r.plan, r.baseline
        lines.append(
            f"| {r.workers} | {p.resources} ({p.custom_resources}) | {p.seconds:.2f} | {b.seconds:.2f} "
            f"| {r.ratio:.2f}x | {r.program_ratio:.2f}x | {r.typed.seconds:.2f} | {r.typed_ratio:.2f}x "
            f"| {_mib(p.peak_rss_kib)} (+{_mib(p.peak_rss_kib - p.rss_floor_kib)}) "
            f"| {_mib(b.peak_rss_kib)} (+{_mib(b.peak_rss_kib - b.rss_floor_kib)}) | {r.depth} |"
        )
    return "\n".join(lines)


def growth_lines(results: Sequence[SizeFigures]) -> list[str]:
    """Marginal cost per added resource between consecutive sizes: flat means linear growth."""
    lines = []
    for a, b in itertools.pairwise(results):
        added = b.plan.resources - a.plan.resources
        if added <= 0:
            continue
        per_worker = added / (b.workers - a.workers)
        ms = (b.plan.seconds - a.plan.seconds) * 1000 / added
        base_ms = (b.baseline.seconds - a.baseline.seconds) * 1000 / added
        kib = (b.plan.peak_rss_kib - a.plan.peak_rss_kib) / added
        base_kib = (b.baseline.peak_rss_kib - a.baseline.peak_rss_kib) / added
        lines.append(
            f"- {a.workers} -> {b.workers} workers: +{added} resources ({per_worker:g} per worker); "
            f"plan {ms:.2f} ms and {kib:.0f} KiB per added resource (baseline {base_ms:.2f} ms, {base_kib:.0f} KiB)"
        )
    return lines


def verdict_lines(results: Sequence[SizeFigures]) -> list[str]:
    lines = []
    depths = sorted({r.depth for r in results})
    if len(depths) == 1:
        lines.append(f"- dependency depth {depths[0]} at every size: workers deploy in parallel")
    else:
        lines.append(f"- dependency depth changes with size ({depths}): something serializes the workers")
    if all(r.baseline_identical for r in results):
        lines.append(
            "- baseline and typed floor registered exactly the resources the plan did (types, names, parents, "
            "deps, inputs, provider versions, source positions)"
        )
    else:
        odd = [r.workers for r in results if not r.baseline_identical]
        lines.append(f"- a replay differs from the plan's resources at sizes {odd}: comparison not like for like")
    largest = max(results, key=lambda r: r.workers)
    lines.append(
        f"- at {largest.workers} workers the plan takes {largest.ratio:.2f}x the bare-SDK baseline "
        f"({largest.median_ratio:.2f}x median over median); the typed-SDK floor alone takes "
        f"{largest.typed.seconds / largest.baseline.seconds:.2f}x it, and the plan {largest.typed_ratio:.2f}x the "
        "typed floor"
    )
    lines.append(
        f"- where the time goes at {largest.workers} workers, plan / typed floor / baseline: " + _breakdown(largest)
    )
    if largest.chain:
        names = [urn.rsplit("::", 1)[-1] for urn in largest.chain]
        lines.append(f"- a longest chain at {largest.workers} workers: {' -> '.join(names)}")
    return lines


def _breakdown(result: SizeFigures) -> str:
    runs = (result.plan, result.typed, result.baseline)

    def part(label: str, seconds: Callable[[RunFigures], float]) -> str:
        return f"{label} {' / '.join(f'{seconds(run):.2f}' for run in runs)} s"

    return "; ".join(
        [
            part("program code", lambda r: r.program_body_seconds),
            part("SDK registering it", lambda r: r.program_seconds - r.program_body_seconds),
            part("garbage collection", lambda r: r.collector_seconds),
            part("validation and writing", lambda r: r.seconds - r.program_seconds - r.collector_seconds),
        ]
    )


def machine_facts() -> str:
    try:
        pulumi_version = metadata.version("pulumi")
    except metadata.PackageNotFoundError:
        pulumi_version = "unknown"
    return (
        f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}, pulumi {pulumi_version}, {platform.system()} {platform.release()}"
    )


def conditions(sizes: Sequence[int], repeat: int) -> str:
    """How the figures were taken, as the command that retakes them plus what it means."""
    command = f"python -m benchmarks.scale --report --sizes {','.join(map(str, sizes))} --repeat {repeat}"
    return (
        f"`{command}`: fastest of {repeat} run(s) per size and kind, each a fresh process; peak RSS "
        f"from `os.wait4` (whole process), '+' = above the RSS once imports are done."
    )


def report_markdown(results: Sequence[SizeFigures], date: datetime.date, how: str = "") -> str:
    return "\n".join(
        [
            FIGURES_BEGIN,
            f"Measured {date.isoformat()} on {machine_facts()}.",
            *([how] if how else []),
            "",
            figures_table(results),
            "",
            *growth_lines(results),
            *verdict_lines(results),
            FIGURES_END,
        ]
    )


def write_markdown(results: Sequence[SizeFigures], path: Path, date: datetime.date, how: str = "") -> None:
    """Replace the generated figures in `path`, keeping the hand-written text around them."""
    block = report_markdown(results, date, how)
    text = path.read_text(encoding="utf-8") if path.exists() else f"# Benchmarks\n\n{FIGURES_BEGIN}\n{FIGURES_END}\n"
    if FIGURES_BEGIN not in text or FIGURES_END not in text:
        text = text.rstrip("\n") + f"\n\n{FIGURES_BEGIN}\n{FIGURES_END}\n"
    head, _, rest = text.partition(FIGURES_BEGIN)
    _, _, tail = rest.partition(FIGURES_END)
    path.write_text(head + block + tail, encoding="utf-8")


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give worker counts separated by commas, e.g. 4,64,512") from None
    if not sizes or any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: every size must be at least 1")
    return sorted(set(sizes))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--emit-stack", nargs=2, metavar=("N", "PATH"), help="write a stack file with N GPU workers")
    action.add_argument("--report", action="store_true", help="measure plan, baseline and typed floor at each size")
    parser.add_argument("--sizes", type=parse_sizes, default=list(DEFAULT_SIZES), help="default: 4,64,512")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size and kind; the fastest counts")
    parser.add_argument("--write-md", action="store_true", help=f"update the figures in {BENCHMARKS_MD.name}")
    parser.add_argument("--profile", action="store_true", help="also write pyinstrument profiles (needs --keep)")
    parser.add_argument("--keep", type=Path, help="keep stacks, plans, logs and profiles under this folder")
    parser.add_argument("--json", type=Path, help="also write the raw figures as JSON to this file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.emit_stack:
        count, path = args.emit_stack
        try:
            workers = int(count)
        except ValueError:
            parser.error(f"--emit-stack: {count!r} is not a worker count")
        written = emit_stack(workers, Path(path))
        print(f"wrote {written}: {workers} GPU workers on {workers} GPU hosts")
        return 0
    if args.repeat < 1:
        parser.error("--repeat: give at least 1")
    if args.profile and args.keep is None:
        parser.error("--profile writes its profiles under --keep DIR; give one")
    try:
        results = measure(args.sizes, repeat=args.repeat, keep=args.keep, profile=args.profile)
    except ChildFailed as failed:
        print(failed, file=sys.stderr)
        return 1
    today = datetime.date.today()
    how = conditions(args.sizes, args.repeat)
    print(f"Measured {today.isoformat()} on {machine_facts()}")
    print(how)
    print(figures_table(results))
    for line in growth_lines(results) + verdict_lines(results):
        print(line)
    if args.json:
        args.json.write_text(
            json.dumps([_as_dict(r) for r in results], indent=2) + "\n",
            encoding="utf-8",
        )
    if args.write_md:
        write_markdown(results, BENCHMARKS_MD, today, how)
        print(f"updated {BENCHMARKS_MD}")
    return 0


def _as_dict(result: SizeFigures) -> dict[str, Any]:
    return {
        "workers": result.workers,
        "plan": vars(result.plan),
        "baseline": vars(result.baseline),
        "typed": vars(result.typed),
        "depth": result.depth,
        "chain": result.chain,
        "baseline_identical": result.baseline_identical,
        "median_seconds": result.median_seconds,
    }


if __name__ == "__main__":
    sys.exit(main())
