"""The scale benchmark, CI-sized: emitted stacks validate, the dependency depth does not grow with
the worker count, the resource count grows by a constant per worker, the bare-SDK baseline
replays exactly what the program registered; and the longest-path function on its own.

The plans run through the benchmark's own child processes (as `--report` does), a few seconds
each on 2 cores.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import itertools
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks import scale, stackgen
from benchmarks.depth import dependency_depth, longest_chain, waits_on
from stacks.environment.loader import ENVIRONMENT_KEY, load_environment, read_stack_file

SIZES = (2, 5, 8)


@dataclass(frozen=True)
class Node:
    urn: str
    custom: bool = True
    parent: str | None = None
    dependencies: list[str] = field(default_factory=list)
    provider: str | None = None


def component(urn: str, parent: str | None = None, dependencies: list[str] | None = None) -> Node:
    return Node(urn, custom=False, parent=parent, dependencies=dependencies or [])


def test_nothing_has_no_depth() -> None:
    assert dependency_depth([]) == 0
    assert longest_chain([]) == []


def test_independent_resources_have_depth_one() -> None:
    assert dependency_depth([Node("a"), Node("b"), Node("c")]) == 1


def test_a_chain_is_as_deep_as_it_is_long() -> None:
    nodes = [Node("a"), Node("b", dependencies=["a"]), Node("c", dependencies=["b"]), Node("d", dependencies=["c"])]
    assert longest_chain(nodes) == ["a", "b", "c", "d"]
    assert dependency_depth(list(reversed(nodes))) == 4  # order of the records does not matter


def test_a_diamond_counts_its_longer_side() -> None:
    nodes = [
        Node("top"),
        Node("left", dependencies=["top"]),
        Node("right-1", dependencies=["top"]),
        Node("right-2", dependencies=["right-1"]),
        Node("bottom", dependencies=["left", "right-2"]),
    ]
    assert longest_chain(nodes) == ["top", "right-1", "right-2", "bottom"]


def test_many_parallel_workers_do_not_add_depth() -> None:
    shared = [Node("switch"), Node("port-group", dependencies=["switch"])]
    workers = [Node(f"vm-{i}", dependencies=["port-group"]) for i in range(100)]
    rules = [Node(f"rule-{i}", dependencies=[f"vm-{i}"]) for i in range(100)]
    assert dependency_depth(shared + workers + rules) == 4


def test_depending_on_a_component_waits_for_everything_under_it() -> None:
    nodes = [
        component("pool"),
        Node("vm-1", parent="pool"),
        Node("vm-2", parent="pool"),
        component("nested", parent="pool"),
        Node("deep-a", parent="nested"),
        Node("deep-b", parent="nested", dependencies=["deep-a"]),
        Node("after-pool", dependencies=["pool"]),
    ]
    assert waits_on(nodes)["after-pool"] == {"vm-1", "vm-2", "deep-a", "deep-b"}
    assert longest_chain(nodes) == ["deep-a", "deep-b", "after-pool"]


def test_a_component_parent_does_not_block_its_children() -> None:
    nodes = [component("fabric"), Node("switch", parent="fabric"), Node("vmk", parent="fabric")]
    assert dependency_depth(nodes) == 1


def test_a_custom_parent_blocks_its_children() -> None:
    nodes = [Node("vm"), Node("disk", parent="vm")]
    assert longest_chain(nodes) == ["vm", "disk"]


def test_a_remote_component_is_a_unit_of_work_and_is_not_expanded() -> None:
    # A remote component (it carries a provider reference) does work of its own: waiting on it
    # is one link, not an expansion into children the mock runtime never sees.
    provider = "urn:provider::id"
    nodes = [
        Node("urn:provider", custom=True),
        Node("crd", custom=False, dependencies=["urn:provider"], provider=provider),
        Node("objects", custom=False, dependencies=["crd"], provider=provider),
        Node("job", custom=False, dependencies=["objects"], provider=provider),
    ]
    assert longest_chain(nodes) == ["urn:provider", "crd", "objects", "job"]


def test_dependencies_outside_the_records_are_ignored() -> None:
    assert dependency_depth([Node("a", dependencies=["urn:pulumi:stack"])]) == 1


def test_a_cycle_is_refused() -> None:
    with pytest.raises(ValueError, match="dependency cycle among 2 resources"):
        longest_chain([Node("a", dependencies=["b"]), Node("b", dependencies=["a"]), Node("c")])


# --- emitted stacks -------------------------------------------------------------------------


def _environment(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())["config"][ENVIRONMENT_KEY]


@pytest.mark.parametrize("workers", [1, *SIZES, 300])
def test_emitted_stacks_validate(tmp_path: Path, workers: int) -> None:
    path = stackgen.emit_stack(workers, tmp_path / f"Pulumi.scale{workers}.yaml")
    env = load_environment(read_stack_file(path))
    assert len(env.gpu_workers.nodes) == workers
    assert len(env.hosts) == workers
    assert env.gpu_workers.placement == "vm-host-rules"
    assert [n.name for n in env.gpu_workers.nodes] == [f"worker-{i}" for i in range(1, workers + 1)]
    assert {n.host for n in env.gpu_workers.nodes} == {h.name for h in env.hosts}


def test_four_workers_is_the_dev_stack(tmp_path: Path) -> None:
    path = stackgen.emit_stack(4, tmp_path / "Pulumi.scale4.yaml")
    assert _environment(path) == _environment(stackgen.BASE_STACK_FILE)


def test_subnets_widen_and_stay_clear_of_the_cluster_ranges(tmp_path: Path) -> None:
    env = load_environment(read_stack_file(stackgen.emit_stack(512, tmp_path / "Pulumi.scale512.yaml")))
    assert env.rdma_network.subnet == IPv4Network("192.168.0.0/21")
    assert env.management_network.subnet == IPv4Network("10.10.0.0/22")
    assert env.hosts[-1].name == "esxi-512.lab.example.com"


def test_widening_refuses_to_overlap_the_pod_range() -> None:
    base = yaml.safe_load(stackgen.BASE_STACK_FILE.read_text())["config"][ENVIRONMENT_KEY]
    base["kubernetes"]["podCidr"] = "10.10.2.0/24"  # right where 512 workers' management range grows
    with pytest.raises(ValueError, match=r"512 workers makes managementNetwork.subnet 10.10.0.0/22 overlap kubernetes"):
        stackgen.scaled_environment(base, 512)


def test_allocation_skips_taken_addresses_and_widening_keeps_the_network() -> None:
    start = IPv4Address("10.0.0.1")
    assert stackgen.allocate(start, 3, [IPv4Address("10.0.0.2")]) == [
        IPv4Address("10.0.0.1"),
        IPv4Address("10.0.0.3"),
        IPv4Address("10.0.0.4"),
    ]
    assert stackgen.widen_to_fit(IPv4Network("10.0.0.0/24"), [IPv4Address("10.0.0.254")]) == IPv4Network("10.0.0.0/24")
    # .255 is the broadcast address of the /24: one more bit
    assert stackgen.widen_to_fit(IPv4Network("10.0.0.0/24"), [IPv4Address("10.0.0.255")]) == IPv4Network("10.0.0.0/23")


def test_emit_stack_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Pulumi.scale3.yaml"
    assert scale.main(["--emit-stack", "3", str(path)]) == 0
    assert "3 GPU workers" in capsys.readouterr().out
    assert len(load_environment(read_stack_file(path)).gpu_workers.nodes) == 3


# --- the report -------------------------------------------------------------------------------


def _figures(workers: int, seconds: float) -> scale.SizeFigures:
    run = scale.RunFigures(
        seconds=seconds,
        program_seconds=seconds,
        process_seconds=seconds + 1,
        resources=10 * workers,
        custom_resources=9 * workers,
        peak_rss_kib=100_000,
        rss_floor_kib=90_000,
    )
    return scale.SizeFigures(
        workers=workers,
        plan=run,
        baseline=run,
        typed=run,
        depth=3,
        chain=["a::x", "b::y", "c::z"],
        baseline_identical=True,
    )


def test_write_markdown_replaces_only_the_figures(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(f"# Benchmarks\n\nintro\n\n{scale.FIGURES_BEGIN}\nold figures\n{scale.FIGURES_END}\n\nnotes\n")
    scale.write_markdown([_figures(4, 1.0), _figures(8, 2.0)], path, datetime.date(2026, 11, 21))
    text = path.read_text()
    assert "old figures" not in text
    assert text.startswith("# Benchmarks\n\nintro\n\n")
    assert text.endswith(f"{scale.FIGURES_END}\n\nnotes\n")
    assert "Measured 2026-11-21 on " in text
    assert "| 8 | 80 (72) | 2.00 | 2.00 | 1.00x |" in text
    assert "dependency depth 3 at every size" in text


def test_the_verdict_gives_the_median_ratio_beside_the_fastest_runs_ratio() -> None:
    result = dataclasses.replace(_figures(512, 6.0), median_seconds={"plan": 6.6, "baseline": 4.0, "typed": 5.9})
    result = dataclasses.replace(result, baseline=dataclasses.replace(result.baseline, seconds=4.0))
    verdict = "\n".join(scale.verdict_lines([result]))
    assert "the plan takes 1.50x the bare-SDK baseline (1.65x median over median)" in verdict


def test_sizes_must_be_positive_counts() -> None:
    assert scale.parse_sizes("512,4,64,4") == [4, 64, 512]
    with pytest.raises(Exception, match="at least 1"):
        scale.parse_sizes("4,0")


# --- the program, CI-sized --------------------------------------------------------------------


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[scale.SizeFigures]]:
    yield scale.measure(SIZES, keep=tmp_path_factory.mktemp("scale"))


def test_dependency_depth_does_not_grow_with_workers(measured: list[scale.SizeFigures]) -> None:
    depths = {r.workers: r.depth for r in measured}
    chains = {r.workers: " -> ".join(urn.rsplit("::", 1)[-1] for urn in r.chain) for r in measured}
    assert depths[SIZES[0]] == depths[SIZES[-1]], (
        f"the longest waiting chain grows with the worker count, so something serializes the workers: {chains}"
    )
    assert len(set(depths.values())) == 1, chains


def test_resource_count_grows_by_a_constant_per_worker(measured: list[scale.SizeFigures]) -> None:
    counts = [(r.workers, r.plan.resources) for r in measured]
    increments = {(b - a) / (m - n) for (n, a), (m, b) in itertools.pairwise(counts)}
    assert len(increments) == 1, f"resources per added worker differ between sizes: {counts}"
    assert increments.pop() >= 1


def test_baseline_registers_exactly_what_the_program_did(measured: list[scale.SizeFigures]) -> None:
    assert all(r.baseline_identical for r in measured)
    assert all(r.baseline.resources == r.plan.resources == r.typed.resources for r in measured)


def test_each_run_splits_its_time_into_parts_that_add_up(measured: list[scale.SizeFigures]) -> None:
    for result in measured:
        for run in (result.plan, result.typed, result.baseline):
            assert 0 < run.program_body_seconds < run.program_seconds < run.seconds
            assert 0 <= run.collector_seconds < run.seconds
            assert run.program_seconds + run.collector_seconds <= run.seconds * 1.001


def test_the_plans_clock_starts_with_the_programs_modules_imported(tmp_path: Path) -> None:
    """Imports are not the program (they cost the same at any size): whatever the plan imports
    while measured is import time counted as plan time, which the replays never pay."""
    stack_file = stackgen.emit_stack(2, tmp_path / "Pulumi.scale2.yaml")
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from benchmarks import _child\n"
        "_child._warm_project_imports()\n"
        "before = set(sys.modules)\n"
        f"_child.measure_plan(Path({str(stack_file)!r}), 'scale2', Path({str(tmp_path / 'run')!r}), False)\n"
        "ours = ('components', 'stacks', 'pulumi', 'pulumi_')\n"
        "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0].startswith(ours)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=scale.PROJECT_DIR, capture_output=True, text=True, check=True
    )
    # pulumi_kubernetes keeps a few tables it loads on first use; nothing of ours, nor a provider.
    imported_while_measured = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    assert [m for m in imported_while_measured if not m.startswith("pulumi_kubernetes._")] == []
