"""The engine's terms of the deployment-time model: what Pulumi itself adds to vCenter's time.

The vCenter model (`durations`, `model`) schedules operations against vCenter's limits.
`pulumi up` adds its own, each measured or taken from Pulumi's source, and each can dominate:

- **provider host**: every Python dynamic resource of a stack is served by one provider process
  whose gRPC server has a pool of 4 threads (`pulumi/dynamic/__main__.py`,
  `ThreadPoolExecutor(max_workers=4)`, pulumi 3.272): at most 4 of our dynamic operations run at
  once, whatever `--parallel` says. Measured with the real host process over gRPC
  (`benchmarks/engine/provider_concurrency.json`: 4 at `--parallel` 4 to 128). A provider plugin on
  the SDK's provider server runs as many as the executor it gives its blocking calls (measured:
  128 with 128 threads).
- **switch joins**: our `DvsHostMember` provider joins the hosts of one switch one at a time (a lock
  per switch: vCenter refuses a second `ReconfigureDvs_Task` of a switch while one runs;
  components/vsphere/dvs_host_member.py). Batched, the hosts that join at about the same time go in
  one task (vSphere's Add Hosts workflow; terraform-provider-vsphere's host blocks of the switch),
  one batch at a time per switch, each at most as large as the joins in flight (plugin_limits.py).
- **plugin CPU** and **Check/Diff on the step loop**: plugin_limits.py, each measured.
- **--parallel**: the CLI's default is 4 x the CPUs the engine may use (pulumi/pulumi
  pkg/cmd/pulumi/operations/up.go, `defaultParallel`: `4 * GOMAXPROCS`, or `PULUMI_PARALLEL`;
  pulumi/pulumi#14989), so a 4-CPU runner runs 16 steps at once.
- **checkpoints**: on a self-managed backend (`file://`, `s3://`) the engine writes the whole state
  after every snapshot mutation, one save at a time, and a step waits for its own (pkg/backend/
  snapshot.go, `mutate`; a step mutates when it begins and when it ends). Save cost measured
  (`benchmarks/engine/checkpoint_cost.json`: the engine's JSON marshalling in Go, then the write on
  a local disk and on an S3 API). `PULUMI_SKIP_CHECKPOINTS=true` (with `PULUMI_EXPERIMENTAL=true`
  before v3.104.0, pulumi/pulumi#15318) "only save[s] the final deployment" (sdk/go/common/env/env.go). Pulumi Cloud journals each step instead and
  sends the entries in parallel (Pulumi blog, "Speeding up pulumi operations by up to 20x", Dec 2025;
  GA from CLI 3.225): modelled as no serialised cost.

Each term is printed with its own floor (the least time it alone forces) so a reader sees which
dominates; the estimate simulates them all together with vCenter's limits.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from stacks import PROJECT_DIR
from stacks.tools.plan.deploy_time.model import Operation
from stacks.tools.plan.deploy_time.plugin_limits import (
    SWITCH_WINDOW_S,
    plugin_cpu_seconds,
    plugin_rate,
    step_loop_seconds,
    switch_batch_size,
    switch_batches_seconds,
)
from stacks.tools.plan.deploy_time.words import format_seconds

DYNAMIC_PREFIX = ("pulumi-python:dynamic/", "gpucluster:")
"""Our resources, served by the provider host this model counts: the dynamic provider's tokens of
stacks planned before the gpucluster plugin, and the plugin's (docs/architecture.md)."""
SWITCH_MEMBERS = ("pulumi-python:dynamic/vsphere:DvsHostMember", "gpucluster:vsphere:DvsHostMember")

DYNAMIC_HOST_CONCURRENCY = 4
"""Operations the SDK's dynamic provider host runs at once: measured (provider_concurrency.json)."""
DEFAULT_EXECUTOR = 640
"""Threads of the provider plugin's executor: the plugin's own default
(`components.gpucluster_resource.DEFAULT_MAX_CONCURRENT_OPERATIONS`; a test holds them equal)."""
PARALLEL_PER_CPU = 4
"""pulumi/pulumi `defaultParallel`: 4 x GOMAXPROCS when neither `--parallel` nor PULUMI_PARALLEL is set."""
DEFAULT_RUNNER_CPUS = 4
SAVE_MS = {"marshal": (37.293, 10.982), "file": (0.0, 1.08), "s3": (31.645, 13.744)}
"""Checkpoint save cost, `fixed ms + per-MB ms`, measured (checkpoint_cost.json): the engine's
indented-JSON marshalling, and the write (`.bak` copy + new file) per backend."""
BYTES_PER_RESOURCE = 2_800
"""State bytes of a resource type not measured: pulumi/pulumi#24408 (85 MB for ~30,000 resources)."""
SAVES_PER_STEP = 2
"""A step's snapshot mutations: one when it begins, one when it ends (pkg/backend/snapshot.go)."""

CHECKPOINT_COST_FILE = PROJECT_DIR / "benchmarks" / "engine" / "checkpoint_cost.json"
PROVIDER_HOSTS = ("dynamic", "plugin")
SWITCH_JOINS = ("serial", "batched")
BACKENDS = ("file", "s3", "cloud")
CHECKPOINTS = ("every-step", "skip")


@dataclass(frozen=True)
class EngineSettings:
    """How `pulumi up` runs: the program's design and the runner's; defaults are today's."""

    provider_host: str = "dynamic"
    executor: int = DEFAULT_EXECUTOR
    """The plugin's executor threads (`provider_host: plugin` only)."""
    switch_joins: str = "serial"
    runner_cpus: int = DEFAULT_RUNNER_CPUS
    parallel: int | None = None
    """`pulumi up --parallel`; None: the CLI's default for the runner, 4 x its CPUs."""
    backend: str = "file"
    checkpoints: str = "every-step"

    def __post_init__(self) -> None:
        for name, allowed in (
            ("provider_host", PROVIDER_HOSTS),
            ("switch_joins", SWITCH_JOINS),
            ("backend", BACKENDS),
            ("checkpoints", CHECKPOINTS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {getattr(self, name)!r}")
        for name in ("executor", "runner_cpus"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive count")
        if self.parallel is not None and self.parallel < 1:
            raise ValueError("parallel must be a positive count")

    @property
    def effective_parallel(self) -> int:
        return self.parallel if self.parallel is not None else PARALLEL_PER_CPU * self.runner_cpus

    @property
    def switch_batch(self) -> int:
        return switch_batch_size(self.effective_parallel, self.provider_concurrency)

    @property
    def provider_concurrency(self) -> int:
        return DYNAMIC_HOST_CONCURRENCY if self.provider_host == "dynamic" else self.executor

    @property
    def saves_every_step(self) -> bool:
        return self.backend != "cloud" and self.checkpoints == "every-step"

    def as_dict(self) -> dict[str, Any]:
        return {
            "providerHost": self.provider_host,
            "executor": self.executor,
            "switchJoins": self.switch_joins,
            "runnerCpus": self.runner_cpus,
            "parallel": self.effective_parallel,
            "backend": self.backend,
            "checkpoints": self.checkpoints,
        }

    def describe(self) -> str:
        host = (
            "dynamic provider host" if self.provider_host == "dynamic" else f"provider plugin, executor {self.executor}"
        )
        parallel = (
            f"--parallel {self.parallel}"
            if self.parallel is not None
            else f"--parallel {self.effective_parallel} (default for {self.runner_cpus} CPUs)"
        )
        if self.backend == "cloud":
            saves = "Pulumi Cloud (journaling)"
        else:
            saves = f"{self.backend}://, " + (
                "a checkpoint per step" if self.saves_every_step else "final checkpoint only"
            )
        return f"{host}, {self.switch_joins} switch joins, {parallel}, {saves}"


DYNAMIC_DESIGN = EngineSettings()
"""The program before the gpucluster plugin (Python dynamic providers, one switch join at a time) on
a 4-CPU runner with a `file://` backend: the "before" of BENCHMARKS.md ("today" in its tables)."""
SHIPPED = EngineSettings(provider_host="plugin", switch_joins="batched")
"""The program as shipped (the gpucluster plugin with its default pool, batched switch joins) with
the CLI's defaults on a 4-CPU runner and a `file://` backend: what `plan` estimates unless told
otherwise."""
PLUGIN_DESIGN = EngineSettings(
    provider_host="plugin",
    executor=DEFAULT_EXECUTOR,
    switch_joins="batched",
    parallel=1280,
    backend="file",
    checkpoints="skip",
)
"""Issue 31's design: a provider plugin whose executor matches vCenter's ~640 concurrent operations
(VMware performance blog, "vCenter Limits for Tasks Running at the Same Time", 2021), batched
switch joins, `pulumi up --parallel 1280` (or PULUMI_PARALLEL), intermediate checkpoints skipped on
the self-managed backend (the recovery command is the safety net for an interrupted run)."""


@dataclass(frozen=True)
class Term:
    """One engine term: the least time it alone forces on `pulumi up`, and what it is."""

    name: str
    floor_seconds: float
    detail: str


@cache
def measured_bytes_per_type() -> Mapping[str, int]:
    """Stored bytes per resource type, measured on our plan (benchmarks/engine/state_size.py)."""
    try:
        return dict(json.loads(CHECKPOINT_COST_FILE.read_text())["bytesPerType"])
    except (OSError, ValueError, KeyError):
        return {}


def state_bytes(types: Iterable[str]) -> int:
    per_type = measured_bytes_per_type()

    # Measured while our resources were dynamic ones; the gpucluster plugin's carry the same
    # properties without the pickled provider, so the dynamic figure is an upper bound for them.
    def size(t: str) -> int:
        dynamic = "pulumi-python:dynamic/" + t.removeprefix("gpucluster:")
        return per_type.get(t, per_type.get(dynamic, BYTES_PER_RESOURCE))

    return sum(size(t) for t in types)


def save_seconds(state: float, backend: str) -> float:
    """One checkpoint save of a state of `state` bytes: marshal, then write."""
    if backend == "cloud":
        return 0.0
    megabytes = state / 1_000_000
    return sum(fixed + per_mb * megabytes for fixed, per_mb in (SAVE_MS["marshal"], SAVE_MS[backend])) / 1000


def _switch(inputs: Mapping[str, Any]) -> str:
    return f"switch:{inputs.get('switch_uuid') or 'rdma'}"


def with_engine(
    ops: Sequence[Operation],
    types: Mapping[str, str],
    inputs: Mapping[str, Mapping[str, Any]],
    settings: EngineSettings,
    save_s: float,
    changed: Collection[str] | None = None,
) -> tuple[list[Operation], dict[str, int]]:
    """The operations with the engine's waits, and the capacities they wait for.

    `types`/`inputs`: by operation key (a resource URN). A dynamic resource's operation waits for
    a thread of the provider host while its engine slot is taken (the gRPC call is in flight); a
    switch join then waits for its switch's lock when joins are serial; every engine step waits for
    its own saves when the backend saves a checkpoint per step. `changed`: the keys whose steps
    do work (a day-two run's non-`same` steps; None: every one); the others keep their zero time.
    """
    host = f"provider:{settings.provider_host}"
    capacity = {host: settings.provider_concurrency}
    out = []
    for op in ops:
        type_ = types.get(op.key, "")
        if not op.engine_slot or (changed is not None and op.key not in changed):
            out.append(op)
            continue
        holds = dict(op.holds)
        extra = 0.0
        if type_ in SWITCH_MEMBERS:
            # Serial: the provider's lock, taken inside a provider thread: a join waiting for its
            # switch keeps its thread (components/vsphere/dvs_host_member.py, `switch_lock`).
            # Batched: a batch of at most `switch_batch` joins at a time per switch, after the
            # gathering window (plugin_limits.py).
            switch = _switch(inputs.get(op.key, {}))
            holds[switch] = 1
            capacity[switch] = 1 if settings.switch_joins == "serial" else settings.switch_batch
            extra = SWITCH_WINDOW_S if settings.switch_joins == "batched" else 0.0
        seconds = op.seconds + extra + (SAVES_PER_STEP * save_s if settings.saves_every_step else 0.0)
        pool = host if type_.startswith(DYNAMIC_PREFIX) else op.pool
        out.append(replace(op, holds=holds, seconds=seconds, pool=pool))
    return out, capacity


def terms(
    ops: Sequence[Operation],
    types: Mapping[str, str],
    inputs: Mapping[str, Mapping[str, Any]],
    resource_count: int,
    settings: EngineSettings,
    changed: Collection[str] | None = None,
    changed_steps: int | None = None,
) -> list[Term]:
    """Each engine term's own floor on `pulumi up` (a work bound: its work over its concurrency).

    `changed`/`changed_steps`: a day-two run's changed resources and steps (None: a fresh deploy,
    every resource created): only they cost operations and saves, each save of the whole state;
    Check and Diff still run for every registration."""
    engine_ops = [op for op in ops if op.engine_slot and (changed is None or op.key in changed)]
    dynamic = [op for op in engine_ops if types.get(op.key, "").startswith(DYNAMIC_PREFIX)]
    concurrency = settings.provider_concurrency
    host = "dynamic provider host" if settings.provider_host == "dynamic" else "provider plugin"
    found = [
        Term(
            "provider host",
            sum(op.seconds for op in dynamic) / concurrency,
            f"{len(dynamic)} operations on the {host}, {concurrency} at a time"
            + (" (measured)" if settings.provider_host == "dynamic" else " (its executor)"),
        )
    ]
    joins: dict[str, float] = {}
    for op in engine_ops:
        if types.get(op.key) in SWITCH_MEMBERS:
            switch = _switch(inputs.get(op.key, {}))
            joins[switch] = joins.get(switch, 0.0) + op.seconds
    if joins and settings.switch_joins == "serial":
        count = sum(1 for op in engine_ops if types.get(op.key) in SWITCH_MEMBERS)
        found.append(Term("switch joins", max(joins.values()), f"{count} host joins, one at a time per switch"))
    elif joins:
        longest = max(op.seconds for op in engine_ops if types.get(op.key) in SWITCH_MEMBERS)
        members: dict[str, int] = {}
        for op in engine_ops:
            if types.get(op.key) in SWITCH_MEMBERS:
                switch = _switch(inputs.get(op.key, {}))
                members[switch] = members.get(switch, 0) + 1
        batch = settings.switch_batch
        found.append(
            Term(
                "switch joins",
                switch_batches_seconds(members.values(), batch, longest),
                f"batched: {max(members.values())} hosts on the largest switch in batches of at most {batch} "
                f"(the joins in flight), one batch at a time, {longest + SWITCH_WINDOW_S:.0f} s each",
            )
        )
    if settings.provider_host == "plugin":
        found.append(
            Term(
                "plugin CPU",
                plugin_cpu_seconds(len(dynamic), settings.runner_cpus),
                f"{len(dynamic)} operations on the plugin process at {plugin_rate(settings.runner_cpus):g} per second "
                f"over HTTPS, {settings.runner_cpus} CPUs (measured at 640 at once; one process: more CPUs not credited)",
            )
        )
        found.append(
            Term(
                "Check/Diff",
                step_loop_seconds(resource_count),
                f"{resource_count} registrations' Check and Diff, one at a time on the engine's step loop, "
                "~2 ms each (the plugin's own pool for them: measured)",
            )
        )
    parallel = settings.effective_parallel
    found.append(
        Term(
            "--parallel",
            sum(op.seconds for op in engine_ops) / parallel,
            f"{len(engine_ops)} steps, {parallel} at a time"
            + ("" if settings.parallel is not None else f" (4 x {settings.runner_cpus} CPUs)"),
        )
    )
    state = state_bytes(types.values())
    if settings.backend == "cloud":
        found.append(Term("checkpoints", 0.0, "Pulumi Cloud journals each step, in parallel"))
    elif settings.saves_every_step and changed_steps is not None:
        saves = SAVES_PER_STEP * changed_steps
        each = save_seconds(state, settings.backend)
        found.append(
            Term(
                "checkpoints",
                saves * each,
                f"{saves} saves of the whole state ({state / 1e6:.0f} MB) on {settings.backend}://, one per changed "
                f"step's begin and end, {each * 1000:.0f} ms each (a `same` step saves none)",
            )
        )
    elif settings.saves_every_step:
        saves = SAVES_PER_STEP * resource_count
        each = save_seconds(state / 2, settings.backend)
        found.append(
            Term(
                "checkpoints",
                saves * each,
                f"{saves} saves of the whole state (~{state / 2e6:.0f} MB on average, {state / 1e6:.0f} MB at the end) "
                f"on {settings.backend}://, one at a time, {each * 1000:.0f} ms each",
            )
        )
    else:
        found.append(
            Term(
                "checkpoints",
                save_seconds(state, settings.backend),
                f"one save of the final state ({state / 1e6:.0f} MB) on {settings.backend}:// (PULUMI_SKIP_CHECKPOINTS)",
            )
        )
    return found


def mean_save_seconds(types: Iterable[str], settings: EngineSettings, *, whole: bool = False) -> float:
    """One save during the run: the state grows from nothing to its final size, so half of it;
    `whole`: a change to a running stack, whose state is whole from the first save."""
    fraction = 1.0 if whole else 0.5
    return save_seconds(state_bytes(types) * fraction, settings.backend) if settings.saves_every_step else 0.0


def final_save_seconds(types: Iterable[str], settings: EngineSettings) -> float:
    """The save after the last step when intermediate ones are skipped (it ends the run)."""
    if settings.backend == "cloud" or settings.saves_every_step:
        return 0.0
    return save_seconds(state_bytes(types), settings.backend)


def term_lines(settings: EngineSettings, found: Sequence[Term]) -> list[str]:
    """What `plan` prints about the engine: its settings, then each term's floor, largest first."""
    lines = [f"  engine: {settings.describe()}; each term alone takes at least:"]
    for term in sorted(found, key=lambda t: -t.floor_seconds):
        lines.append(f"    {term.name} {format_seconds(term.floor_seconds)}: {term.detail}")
    return lines
