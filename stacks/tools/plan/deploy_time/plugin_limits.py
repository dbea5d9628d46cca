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
- **Plugin CPU**: the plugin's work per operation (SOAP envelopes through pyVmomi, TLS, gRPC, the
  property conversion) runs in one Python process: one interpreter lock, one pool of threads, so
  its rate is the process's, not the runner's CPUs' (issue 52). Measured with the real plugin
  process, our real `PvrdmaHostSettings` create and 640 operations at once over HTTPS to the
  simulator harness (`-tls`), the plugin and the simulator on 2 CPUs of a machine shared with other
  jobs (BENCHMARKS.md, "The plugin over HTTPS"): 11.7 creates/s, a floor of operations / 11.7 s on
  the run, whatever the runner's size past 2 CPUs (not measured on 4: a larger runner is credited
  nothing); on 1 CPU half. Conservative: the simulator's own CPU (TLS included) is counted
  against the plugin, and most of our operations are waits lighter than a create. It replaces
  9.7 operations/s *per CPU*, measured over plain HTTP at 128 at once and taken as linear.
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
PLUGIN_OPS_PER_S = 11.7
"""Operations per second of the plugin process, on 2 CPUs or more (measured; module docstring)."""
STEP_LOOP_S = 0.002
"""One registration's Check and Diff on the step loop (measured ~1 ms each under saturation)."""


def switch_batch_size(parallel: int, executor: int) -> int:
    """The most joins one batch can hold: those in flight, bounded by engine slots and plugin threads."""
    return max(1, min(parallel, executor))


def switch_batches_seconds(members_per_switch: Iterable[int], batch: int, join_s: float) -> float:
    """The longest switch's serial batches."""
    return max((math.ceil(n / batch) * (join_s + SWITCH_WINDOW_S) for n in members_per_switch if n), default=0.0)


def plugin_rate(runner_cpus: int) -> float:
    """The plugin process's operations per second on a runner of `runner_cpus`."""
    return PLUGIN_OPS_PER_S if runner_cpus >= 2 else PLUGIN_OPS_PER_S / 2


def plugin_cpu_seconds(operations: int, runner_cpus: int) -> float:
    return operations / plugin_rate(runner_cpus)


def step_loop_seconds(resources: int) -> float:
    return resources * STEP_LOOP_S
