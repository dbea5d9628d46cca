"""Three limits of `pulumi up` that live in the gpucluster plugin and the engine's step loop, each
measured here, each a term of the deployment-time model (engine.py uses them).

- **Switch batches**: the hosts joining one switch go to vCenter in batches, one batch at a time per
  switch (vCenter refuses a second `ReconfigureDvs_Task` of a switch while one runs), each batch
  holding the joins that reached the plugin while the previous one ran
  (provider/switch_batch.py). A batch can only be as large as the joins in flight: at most
  `--parallel` engine steps and the plugin's pool. So a switch with N members takes
  ceil(N / batch) batches of one join each (`switch_member`, 20 s) plus the gathering window
  (`DEFAULT_WINDOW_S`, 2 s). The simulation gives each switch `batch` units: a batch's joins start
  together and end together, so a unit frees when the whole batch does.
- **Plugin CPU**: the plugin's work per operation (SOAP envelopes through pyVmomi, gRPC, the
  property conversion) is CPU-bound on the machine running `pulumi up`. Measured with the real
  plugin process and our real `PvrdmaHostSettings` create against the vCenter simulator, the
  simulator on the same 2 CPUs (BENCHMARKS.md, "The real plugin's server": 19.49 creates/s at
  `--parallel` 128, 2 CPUs): 9.7 operations per second per CPU, a floor of
  operations / (9.7 x CPUs) on the run. Conservative: the simulator's own CPU is counted against
  the plugin, and most of our operations are waits (node joins, readiness) lighter than a create.
- **Check and Diff on the step loop**: the engine calls them one registration at a time and waits
  (pulumi/pulumi pkg/resource/deploy/step_generator.go); the plugin answers them on a pool of
  their own (provider/pools.py), measured at ~1 ms each with 640 operation threads busy
  (`python -m benchmarks.engine.step_loop`; BENCHMARKS.md). A floor of resources x (Check + Diff).
  Before that pool, a Check waited for an operation thread: 17-18 s behind 16 busy threads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

SWITCH_WINDOW_S = 2.0
"""provider/switch_batch.py `DEFAULT_WINDOW_S` (a test holds them equal)."""
PLUGIN_OPS_PER_CPU_S = 9.7
"""Operations per second per runner CPU (19.49 creates/s on 2 CPUs, measured; module docstring)."""
STEP_LOOP_S = 0.002
"""One registration's Check and Diff on the step loop (measured ~1 ms each under saturation)."""


def switch_batch_size(parallel: int, executor: int) -> int:
    """The most joins one batch can hold: those in flight, bounded by engine slots and plugin threads."""
    return max(1, min(parallel, executor))


def switch_batches_seconds(members_per_switch: Iterable[int], batch: int, join_s: float) -> float:
    """The longest switch's serial batches."""
    return max((math.ceil(n / batch) * (join_s + SWITCH_WINDOW_S) for n in members_per_switch if n), default=0.0)


def plugin_cpu_seconds(operations: int, runner_cpus: int) -> float:
    return operations / (PLUGIN_OPS_PER_CPU_S * runner_cpus)


def step_loop_seconds(resources: int) -> float:
    return resources * STEP_LOOP_S
