"""`python -m benchmarks.deploy_time`: the deployment-time model at 4, 64 and 512 GPU workers.

Plans a stack of N workers (derived from dev by `stackgen`), with linked and with full clones,
and reports the modelled `pulumi up` wall time, its critical-path bound (infinite parallelism,
no vCenter queueing), their ratio, the time until the last worker joined, and what dominates.
`--write-md` puts the table into BENCHMARKS.md between its deploy-time markers. The durations
are the model's documented defaults (`stacks/tools/plan/deploy_time/durations.py`); `--durations FILE` overrides.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from benchmarks.stackgen import BASE_STACK_FILE, scaled_document
from stacks import PROJECT_DIR
from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, config_for_runtime, load_environment
from stacks.tools.plan.command import SECRET_PLACEHOLDER
from stacks.tools.plan.deploy_time.durations import Durations, Estimate, estimate, format_seconds, load_durations
from stacks.tools.plan.mock_runtime import run_program, run_project_main

BENCHMARKS_MD = PROJECT_DIR / "BENCHMARKS.md"
BEGIN = "<!-- deploy-time:begin (python -m benchmarks.deploy_time --write-md) -->"
END = "<!-- deploy-time:end -->"


@dataclass(frozen=True)
class Row:
    workers: int
    linked: bool
    result: Estimate
    unlimited_template_host: Estimate
    """The same plan if the template's host did not count against vCenter's units (a sensitivity)."""


def plan_resources(workers: int, *, linked: bool) -> list[object]:
    """The program's resources for a dev-shaped stack of `workers` GPU workers."""
    document = scaled_document(yaml.safe_load(BASE_STACK_FILE.read_text()), workers)
    environment = copy.deepcopy(document["config"][ENVIRONMENT_KEY])
    environment.setdefault("vm", {})["linkedClone"] = linked
    document["config"][ENVIRONMENT_KEY] = environment
    view = ConfigView(values=document["config"], secret_keys=frozenset())
    load_environment(view)
    config, secret_keys = config_for_runtime(view, SECRET_PLACEHOLDER)
    run = run_program(
        run_project_main(PROJECT_DIR),
        project="vsphere-gpu-cluster",
        stack=f"w{workers}",
        config=config,
        secret_keys=secret_keys,
    )
    return list(run.resources)


def measure(sizes: Sequence[int], durations: Durations) -> list[Row]:
    rows = []
    for workers in sizes:
        for linked in (True, False):
            resources = plan_resources(workers, linked=linked)
            rows.append(
                Row(
                    workers=workers,
                    linked=linked,
                    result=estimate(resources, durations),
                    unlimited_template_host=estimate(resources, replace(durations, host_units=10**9)),
                )
            )
    return rows


def report_markdown(rows: Sequence[Row]) -> str:
    lines = [
        BEGIN,
        "| workers | clones | pulumi up | bound | ratio | ready for training | most time on the critical path "
        "| pulumi up if the template host were not a limit |",
        "|---:|---|---:|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        r = row.result
        dominant = ", ".join(f"{kind} {format_seconds(s)}" for kind, s in r.dominant(r.pulumi_up)[:2])
        lines.append(
            f"| {row.workers} | {'linked' if row.linked else 'full'} | {format_seconds(r.pulumi_up.seconds)} "
            f"| {format_seconds(r.bound.seconds)} | {r.ratio:.2f}x | {format_seconds(r.ready.seconds)} | {dominant} "
            f"| {format_seconds(row.unlimited_template_host.pulumi_up.seconds)} |"
        )
    lines.append(END)
    return "\n".join(lines)


def write_markdown(rows: Sequence[Row], path: Path = BENCHMARKS_MD) -> None:
    text = path.read_text()
    block = report_markdown(rows)
    if BEGIN in text and END in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.deploy_time", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4,64,512", help="worker counts, comma separated")
    parser.add_argument("--durations", help="JSON/YAML file overriding the model's durations")
    parser.add_argument("--write-md", action="store_true", help=f"update the table in {BENCHMARKS_MD.name}")
    args = parser.parse_args(argv)
    sizes = sorted({int(n) for n in args.sizes.split(",") if n.strip()})
    rows = measure(sizes, load_durations(Path(args.durations) if args.durations else None))
    print(report_markdown(rows))
    for row in rows:
        path = row.result.path_labels(row.result.pulumi_up)
        print(
            f"{row.workers} {'linked' if row.linked else 'full'}: "
            + " -> ".join(path[:4] + (["..."] if len(path) > 4 else []))
        )
    if args.write_md:
        write_markdown(rows)
        print(f"updated {BENCHMARKS_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
