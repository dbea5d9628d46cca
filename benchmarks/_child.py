"""One measured run, in a process of its own so that its peak RSS is its own.

    python -m benchmarks._child plan STACK_FILE STACK WORKDIR [--profile]
    python -m benchmarks._child baseline RECORDS_JSON STACK WORKDIR [--profile]
    python -m benchmarks._child typed RECORDS_JSON STACK WORKDIR [--profile]

Writes `WORKDIR/<mode>.json` (timings, counts, the RSS after imports) and the recorded resources
(`WORKDIR/<mode>-records.json`); with `--profile`, a pyinstrument text profile next to them.
Imports happen before the clock starts: they cost the same at any size and are not the program.
"""

from __future__ import annotations

import argparse
import ast
import gc
import importlib
import json
import resource
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from benchmarks import baseline
from benchmarks.baseline import load_records, save_records, typed_class
from stacks.environment.loader import read_stack_file
from stacks.tools.plan import command as plan_module
from stacks.tools.plan.mock_runtime import ProgramRun, RecordedResource

PROJECT_DIR = Path(__file__).resolve().parent.parent


def _warm_project_imports() -> None:
    """Import what `__main__.py` imports, whatever it is this week (the program keeps growing)."""
    tree = ast.parse((PROJECT_DIR / "__main__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            package = importlib.import_module(node.module)
            # `from stacks import wiring` imports the submodule `stacks.wiring`, not only `stacks`.
            for alias in node.names:
                if not hasattr(package, alias.name):
                    importlib.import_module(f"{node.module}.{alias.name}")


def _rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class _Timed:
    """Wraps a function and adds up the seconds spent in it."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.seconds = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


class _CollectorClock(AbstractContextManager["_CollectorClock"]):
    """Adds up the seconds the cyclic garbage collector runs within the block (gc.callbacks)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def _callback(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started

    def __enter__(self) -> _CollectorClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def _profiler(workdir: Path, mode: str, enabled: bool) -> AbstractContextManager[Any]:
    if not enabled:
        return nullcontext()
    from pyinstrument import Profiler

    class _Profile(AbstractContextManager[Any]):
        def __enter__(self) -> _Profile:
            self.profiler = Profiler(interval=0.001)
            self.profiler.start()
            return self

        def __exit__(self, *exc: object) -> None:
            self.profiler.stop()
            (workdir / f"{mode}-profile.txt").write_text(
                self.profiler.output_text(unicode=False, color=False, show_all=False), encoding="utf-8"
            )

    return _Profile()


def measure_plan(stack_file: Path, stack: str, workdir: Path, profile: bool) -> dict[str, Any]:
    _warm_project_imports()
    view = read_stack_file(stack_file)
    timed = _Timed(plan_module.run_program)
    body = _Timed(plan_module.run_project_main(PROJECT_DIR))
    # plan_stack looks run_program and run_project_main up in its own module: timing them there
    # splits the program's run (and, within it, the program's own code) from validation and
    # writing, without copying plan_stack's steps here.
    plan_module.run_program = timed

    def timed_main(project_dir: Path) -> Callable[[], None]:  # the one plan_stack asks for: PROJECT_DIR
        return body

    plan_module.run_project_main = timed_main
    return _clocked(
        "plan",
        workdir,
        profile,
        timed,
        body,
        lambda: plan_module.plan_stack(view, stack=stack, out_dir=workdir / "plan").run,
    )


def measure_replay(records_file: Path, stack: str, workdir: Path, profile: bool, *, typed: bool) -> dict[str, Any]:
    """The bare-SDK baseline, or with `typed` the typed-SDK floor (benchmarks/baseline.py), timed
    the way `measure_plan` times the plan, through the same wrappers: the SDK converts every frame
    on the stack for each registration, so both must stand on stacks of the same depth."""
    mode = "typed" if typed else "baseline"
    records = load_records(records_file)
    if typed:
        # Provider packages imported and argument names mapped before the clock, as the plan's
        # imports are: neither is work that grows with the stack.
        for type_token in {r.type for r in records}:
            typed_class(type_token)
    timed = _Timed(baseline.run_program)
    body = _Timed(baseline.replay_program(records, typed=typed))

    def timed_replay(records: Sequence[RecordedResource], *, typed: bool = False) -> Callable[[], None]:
        return body

    baseline.run_program = timed
    baseline.replay_program = timed_replay
    return _clocked(
        mode,
        workdir,
        profile,
        timed,
        body,
        lambda: baseline.replay_stack(records, stack=stack, out_dir=workdir / mode, typed=typed),
    )


def _clocked(
    mode: str, workdir: Path, profile: bool, timed: _Timed, body: _Timed, work: Callable[[], ProgramRun]
) -> dict[str, Any]:
    """Run `work` on the clock (and under the collector clock and the profiler); its figures."""
    rss_floor = _rss_kib()
    with _profiler(workdir, mode, profile), _CollectorClock() as collector:
        start = time.perf_counter()
        run = work()
        seconds = time.perf_counter() - start
    save_records(run.resources, workdir / f"{mode}-records.json")
    return {
        "seconds": seconds,
        "program_seconds": timed.seconds,
        "program_body_seconds": body.seconds,
        "collector_seconds": collector.seconds,
        "rss_floor_kib": rss_floor,
        **_counts(run),
    }


def _counts(run: ProgramRun) -> dict[str, int]:
    custom = sum(1 for r in run.resources if r.custom)
    return {"resources": len(run.resources), "custom_resources": custom}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._child")
    parser.add_argument("mode", choices=["plan", "baseline", "typed"])
    parser.add_argument("source", type=Path, help="stack file (plan) or recorded resources (baseline)")
    parser.add_argument("stack")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.mode == "plan":
        figures = measure_plan(args.source, args.stack, args.workdir, args.profile)
    else:
        figures = measure_replay(args.source, args.stack, args.workdir, args.profile, typed=args.mode == "typed")
    (args.workdir / f"{args.mode}.json").write_text(json.dumps(figures), encoding="utf-8")


if __name__ == "__main__":
    main()
