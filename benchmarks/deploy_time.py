"""`python -m benchmarks.deploy_time`: the deployment-time model at 4, 64 and 512 GPU workers.

Plans a stack of N workers (derived from dev by `stackgen`), with linked and with full clones,
and reports the modelled `pulumi up` wall time, its critical-path bound (infinite parallelism,
no vCenter queueing), their ratio, the time until the last worker joined, and what dominates;
then the engine's terms (provider host, switch joins, `--parallel`, checkpoints) for today's
design and for issue 31's plugin design, on `file://`, `s3://` and Pulumi Cloud, each with the
least time it alone forces. `--write-md` puts the tables into BENCHMARKS.md between their
markers. The durations are the model's documented defaults (`stacks/tools/plan/deploy_time/durations.py`);
`--durations FILE` overrides; `--runner-cpus` sets the runner (today's `--parallel` default).
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
from stacks.environment.pulumi_up import PulumiUpSettings
from stacks.tools.plan.command import SECRET_PLACEHOLDER
from stacks.tools.plan.deploy_time.durations import Durations, load_durations
from stacks.tools.plan.deploy_time.engine import DYNAMIC_DESIGN, PLUGIN_DESIGN, EngineSettings
from stacks.tools.plan.deploy_time.estimate import Estimate, estimate
from stacks.tools.plan.deploy_time.words import format_seconds
from stacks.tools.plan.deploy_time.workflow import cli_default_engine, plan_width, workflow_engine
from stacks.tools.plan.mock_runtime import run_program, run_project_main

BENCHMARKS_MD = PROJECT_DIR / "BENCHMARKS.md"
BEGIN = "<!-- deploy-time:begin (python -m benchmarks.deploy_time --write-md) -->"
END = "<!-- deploy-time:end -->"
ENGINE_BEGIN = "<!-- deploy-engine:begin (python -m benchmarks.deploy_time --write-md) -->"
ENGINE_END = "<!-- deploy-engine:end -->"
GOAL = 1.25
"""Issue 31: linked clones within 1.25x of vCenter's bound with the engine's terms counted."""


WORKFLOW_RUNNERS = (2, 4)
"""The deploy workflow's runners the benchmark states (issue 44): GitHub's hosted runners for
private repositories have 2 CPUs, for public ones 4."""


def workflow_designs(width: int) -> list[tuple[str, EngineSettings]]:
    """What deploy.yml runs for a first deploy (creates only: checkpoints skipped) on an s3://
    backend, per runner size, and a bare `pulumi up` with the CLI's defaults on the same runner."""
    found = []
    for cpus in WORKFLOW_RUNNERS:
        deploy = PulumiUpSettings.model_validate({"runnerCpus": cpus, "backend": "s3"})
        found.append((f"workflow, {cpus} CPUs", workflow_engine(deploy, width, create_only=True)))
        found.append((f"CLI defaults, {cpus} CPUs", cli_default_engine(deploy)))
    return found


def designs(runner_cpus: int) -> list[tuple[str, EngineSettings]]:
    """Today's design and the plugin design, on each backend."""
    today = replace(DYNAMIC_DESIGN, runner_cpus=runner_cpus)
    return [
        ("today", today),
        ("today", replace(today, backend="s3")),
        ("plugin", replace(PLUGIN_DESIGN, checkpoints="every-step")),
        ("plugin", replace(PLUGIN_DESIGN, backend="s3", checkpoints="every-step")),
        ("plugin", PLUGIN_DESIGN),
        ("plugin", replace(PLUGIN_DESIGN, backend="s3")),
        ("plugin", replace(PLUGIN_DESIGN, backend="cloud", checkpoints="every-step")),
    ]


@dataclass(frozen=True)
class Row:
    workers: int
    linked: bool
    result: Estimate
    """Today's design (the plan's default engine)."""
    unlimited_template_host: Estimate
    """The same plan if the template's host did not count against vCenter's units (a sensitivity)."""
    engine: tuple[tuple[str, Estimate], ...] = ()
    """Linked clones only: each design of `designs()`, by its name."""


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


def measure(sizes: Sequence[int], durations: Durations, runner_cpus: int = DYNAMIC_DESIGN.runner_cpus) -> list[Row]:
    rows = []
    for workers in sizes:
        for linked in (True, False):
            resources = plan_resources(workers, linked=linked)
            today = replace(DYNAMIC_DESIGN, runner_cpus=runner_cpus)
            rows.append(
                Row(
                    workers=workers,
                    linked=linked,
                    result=estimate(resources, durations, today),
                    unlimited_template_host=estimate(resources, replace(durations, host_units=10**9), engine=None),
                    engine=tuple(
                        (name, estimate(resources, durations, e))
                        for name, e in [*designs(runner_cpus), *workflow_designs(_width(resources, durations))]
                    )
                    if linked
                    else (),
                )
            )
    return rows


def _width(resources: Sequence[object], durations: Durations) -> int:
    vcenter = estimate(resources, durations, engine=None)
    return plan_width(vcenter.bound, vcenter.pulumi_up)


def report_markdown(rows: Sequence[Row]) -> str:
    lines = [
        BEGIN,
        "| workers | clones | pulumi up (today's engine) | vCenter's limits alone | bound | ratio | ready for training "
        "| most time on the critical path | vCenter alone if the template host were not a limit |",
        "|---:|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        r = row.result
        dominant = ", ".join(f"{kind} {format_seconds(s)}" for kind, s in r.dominant(r.pulumi_up)[:2])
        vcenter = r.vcenter.seconds if r.vcenter is not None else r.pulumi_up.seconds
        lines.append(
            f"| {row.workers} | {'linked' if row.linked else 'full'} | {format_seconds(r.pulumi_up.seconds)} "
            f"| {format_seconds(vcenter)} | {format_seconds(r.bound.seconds)} | {r.ratio:.2f}x "
            f"| {format_seconds(r.ready.seconds)} | {dominant} "
            f"| {format_seconds(row.unlimited_template_host.pulumi_up.seconds)} |"
        )
    lines.append(END)
    return "\n".join(lines)


def engine_markdown(rows: Sequence[Row]) -> str:
    """Per size (linked clones), each design: pulumi up, its ratio to vCenter's bound, each term's floor."""
    lines = [
        ENGINE_BEGIN,
        "| workers | design | engine settings | pulumi up | ratio to bound | within 1.25x | provider host "
        "| switch joins | --parallel | checkpoints | plugin CPU | Check/Diff |",
        "|---:|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        for name, result in row.engine:
            assert result.engine is not None
            floors = {t.name: format_seconds(t.floor_seconds) for t in result.terms}
            lines.append(
                f"| {row.workers} | {name} | {result.engine.describe()} | {format_seconds(result.pulumi_up.seconds)} "
                f"| {result.ratio:.2f}x | {'yes' if result.ratio <= GOAL else 'no'} | "
                + " | ".join(
                    floors.get(t, "-")
                    for t in ("provider host", "switch joins", "--parallel", "checkpoints", "plugin CPU", "Check/Diff")
                )
                + " |"
            )
    lines.append(ENGINE_END)
    return "\n".join(lines)


def _replace_block(text: str, begin: str, end: str, block: str) -> str:
    if begin in text and end in text:
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        return head + block + tail
    return text.rstrip("\n") + "\n\n" + block + "\n"


def write_markdown(rows: Sequence[Row], path: Path = BENCHMARKS_MD) -> None:
    text = _replace_block(path.read_text(), BEGIN, END, report_markdown(rows))
    if any(row.engine for row in rows):
        text = _replace_block(text, ENGINE_BEGIN, ENGINE_END, engine_markdown(rows))
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.deploy_time", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4,64,512", help="worker counts, comma separated")
    parser.add_argument("--durations", help="JSON/YAML file overriding the model's durations")
    parser.add_argument("--runner-cpus", type=int, default=DYNAMIC_DESIGN.runner_cpus, help="CPUs of today's runner")
    parser.add_argument("--write-md", action="store_true", help=f"update the tables in {BENCHMARKS_MD.name}")
    args = parser.parse_args(argv)
    if args.runner_cpus < 1:
        parser.error("--runner-cpus must be a positive count")
    sizes = sorted({int(n) for n in args.sizes.split(",") if n.strip()})
    rows = measure(sizes, load_durations(Path(args.durations) if args.durations else None), args.runner_cpus)
    print(report_markdown(rows))
    print(engine_markdown(rows))
    for row in rows:
        path = row.result.path_labels(row.result.pulumi_up)
        print(
            f"{row.workers} {'linked' if row.linked else 'full'}: "
            + " -> ".join(path[:4] + (["..."] if len(path) > 4 else []))
        )
    for row in rows:
        for name, result in row.engine:
            if result.engine is not None:
                terms = "; ".join(f"{t.name}: {t.detail}" for t in result.terms)
                print(f"{row.workers} {name} ({result.engine.describe()}): {terms}")
    if args.write_md:
        write_markdown(rows)
        print(f"updated {BENCHMARKS_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
