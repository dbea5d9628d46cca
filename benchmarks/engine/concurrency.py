"""`python -m benchmarks.engine.concurrency`: how many provider operations a host runs at once.

Starts the vCenter simulator harness with a delay on `QueryOptions` (each create blocks on vCenter
for about twice it), then for each `--parallel` level starts the provider host afresh and drives
`2 x parallel` creates through it (`drive.py`): the SDK's dynamic host (`python -m pulumi.dynamic`,
the "before") and the SDK's provider server with an executor (`plugin_host.py`, the "after"), or
any server given by `--server`. Prints a table; `--write FILE` stores the figures as JSON (the
deployment model reads `benchmarks/engine/provider_concurrency.json`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pulumi.dynamic.dynamic import serialize_provider

from benchmarks.engine import processes
from benchmarks.engine.drive import ENGINE_ADDRESS, HostSpec, RunResult, python_module, run
from benchmarks.engine.workload import (
    CALLS_PER_CREATE,
    DELAYED_METHOD,
    RESOURCE_TYPE,
    TimedPvrdmaProvider,
    inputs,
    vsphere_config,
)
from stacks import PROJECT_DIR

HARNESS = PROJECT_DIR / "build" / "vcsim-harness"
MEASURED = Path(__file__).with_name("provider_concurrency.json")
PLUGIN_TYPE = "gpucluster:vsphere:PvrdmaHostSettings"


def dynamic_host() -> HostSpec:
    """The SDK's dynamic provider host, as the engine runs it for `pulumi-python:dynamic` resources
    (the `pulumi-resource-pulumi-python` plugin execs `python -m pulumi.dynamic`)."""
    # One call: the SDK's pickler patch nests once (components/dynamic_resource.py explains it).
    pickled = serialize_provider(TimedPvrdmaProvider())
    return HostSpec("dynamic", python_module("pulumi.dynamic"), RESOURCE_TYPE, {"__provider": pickled})


def plugin_host(executor: int) -> HostSpec:
    return HostSpec(
        f"plugin (executor {executor})",
        python_module("benchmarks.engine.plugin_host", "--executor", str(executor)),
        PLUGIN_TYPE,
        {},
    )


def custom_host(command: str, type_token: str, executor: int | None = None) -> HostSpec:
    """Any provider server: the command, then the engine's address as its last argument. Configured
    as an explicit provider resource configures the gpucluster plugin (`HostSpec.provider_inputs`),
    with `maxConcurrentOperations` = `executor` when given (the plugin's default otherwise)."""
    extra = {} if executor is None else {"maxConcurrentOperations": str(executor)}
    name = f"server `{command}`" + ("" if executor is None else f" (maxConcurrentOperations {executor})")
    return HostSpec(name, (*shlex.split(command), ENGINE_ADDRESS), type_token, {}, provider_inputs=extra)


def measure(
    specs: Sequence[HostSpec], levels: Sequence[int], delay_ms: int, *, tls: bool = False, harness: Path = HARNESS
) -> list[RunResult]:
    """`tls`: the simulator serves HTTPS, as vCenter does (the harness's `-tls`)."""
    simulator, url = processes.start_announcing(
        [str(harness), "-port", "0", "-exit-on-stdin-eof", "-method-delay", f"{DELAYED_METHOD}={delay_ms}"]
        + (["-tls"] if tls else []),
        processes.vcsim_url_line,
        cwd=PROJECT_DIR,
    )
    config = vsphere_config(url)
    results = []
    try:
        for spec in specs:
            for parallel in levels:
                work = [inputs(i) for i in range(2 * parallel)]
                result = run(spec, config, work, parallel, cwd=PROJECT_DIR)
                print(_row(result), flush=True)
                results.append(result)
    finally:
        processes.stop(simulator)
    return results


HEADER = (
    "| host | --parallel | creates | wall s | creates/s | max concurrency | mean concurrency | create s | diffs/s |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def _row(r: RunResult) -> str:
    def fmt(value: float | None, digits: int = 2) -> str:
        return "n/a" if value is None else f"{value:.{digits}f}"

    return (
        f"| {r.host} | {r.parallel} | {r.operations} | {r.create_wall_s:.2f} | {r.creates_per_s:.2f} "
        f"| {r.max_concurrency if r.max_concurrency is not None else 'n/a'} | {fmt(r.mean_concurrency, 1)} "
        f"| {fmt(r.mean_create_s)} | {r.diffs_per_s:.0f} |"
    )


def document(results: Sequence[RunResult], delay_ms: int, command: str) -> dict[str, Any]:
    """What the model reads: per host, the most creates it ran at once."""
    hosts: dict[str, int] = {}
    for r in results:
        if r.max_concurrency is not None:
            hosts[r.host] = max(hosts.get(r.host, 0), r.max_concurrency)
    return {
        "date": datetime.date.today().isoformat(),
        "command": command,
        "pulumiSdk": version("pulumi"),
        "python": platform.python_version(),
        "machine": f"{os.cpu_count()} CPUs ({platform.machine()}), {platform.system()} {platform.release()}",
        "vcenter": f"build/vcsim-harness, {DELAYED_METHOD} delayed {delay_ms} ms ({CALLS_PER_CREATE} calls per create)",
        "maxConcurrency": hosts,
        "runs": [r.as_dict() for r in results],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.engine.concurrency", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--parallel", default="4,16,64,128", help="`pulumi up --parallel` levels, comma separated")
    parser.add_argument("--delay-ms", type=int, default=1000, help=f"simulator delay per {DELAYED_METHOD} call")
    parser.add_argument(
        "--executor", type=int, default=128, help="threads of the plugin host's executor (and --server's pool)"
    )
    parser.add_argument("--hosts", default="dynamic,plugin", help="which of dynamic, plugin to run")
    parser.add_argument("--server", help="another provider server's command (the engine address is appended)")
    parser.add_argument("--type", default=PLUGIN_TYPE, help="the type token --server serves")
    parser.add_argument("--write", type=Path, help=f"store the figures as JSON (the model reads {MEASURED.name})")
    parser.add_argument("--tls", action="store_true", help="the simulator serves HTTPS, as vCenter does")
    parser.add_argument("--harness", type=Path, default=HARNESS, help="the simulator harness binary")
    args = parser.parse_args(argv)
    levels = [int(n) for n in args.parallel.split(",") if n.strip()]
    chosen = {h.strip() for h in args.hosts.split(",") if h.strip()}
    specs = ([dynamic_host()] if "dynamic" in chosen else []) + (
        [plugin_host(args.executor)] if "plugin" in chosen else []
    )
    if args.server:
        specs.append(custom_host(args.server, args.type, args.executor if "--executor" in (argv or sys.argv) else None))
    print(HEADER, flush=True)
    results = measure(specs, levels, args.delay_ms, tls=args.tls, harness=args.harness)
    if args.write:
        command = "python -m benchmarks.engine.concurrency " + " ".join(
            shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
        )
        args.write.write_text(json.dumps(document(results, args.delay_ms, command), indent=2) + "\n")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
