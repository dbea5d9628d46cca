"""The engine settings as command-line options (`plan`, `python -m benchmarks.deploy_time`)."""

from __future__ import annotations

from typing import Any

from stacks.tools.plan.deploy_time.engine import (
    BACKENDS,
    CHECKPOINTS,
    DEFAULT_EXECUTOR,
    DEFAULT_RUNNER_CPUS,
    PROVIDER_HOSTS,
    SHIPPED,
    SWITCH_JOINS,
    EngineSettings,
)


def add_engine_arguments(parser: Any) -> None:
    """The engine settings as command-line options (`plan`, `python -m benchmarks.deploy_time`)."""
    group = parser.add_argument_group("deployment model: the engine (docs/deployment-time.md, the engine's terms)")
    group.add_argument(
        "--runner-cpus",
        type=int,
        default=DEFAULT_RUNNER_CPUS,
        help="CPUs of the machine running `pulumi up` (default 4: --parallel 16)",
    )
    group.add_argument("--parallel", type=int, help="`pulumi up --parallel` (default: 4 x --runner-cpus, as the CLI)")
    group.add_argument(
        "--provider-host",
        choices=PROVIDER_HOSTS,
        default=SHIPPED.provider_host,
        help="who serves our custom resources (default: plugin, the gpucluster provider the program ships; "
        "dynamic: the Python dynamic providers it had before)",
    )
    group.add_argument(
        "--executor",
        type=int,
        default=DEFAULT_EXECUTOR,
        help="the provider plugin's executor threads (--provider-host plugin)",
    )
    group.add_argument(
        "--switch-joins",
        choices=SWITCH_JOINS,
        default=SHIPPED.switch_joins,
        help="host joins of a switch batched (default, as the plugin does) or one at a time (the dynamic providers)",
    )
    group.add_argument("--backend", choices=BACKENDS, default="file", help="state backend (default: file)")
    group.add_argument(
        "--checkpoints", choices=CHECKPOINTS, default="every-step", help="skip: PULUMI_SKIP_CHECKPOINTS=true"
    )


def engine_from_args(args: Any) -> EngineSettings:
    """Raises ValueError naming the option for a count that is not positive."""
    for option in ("runner_cpus", "parallel", "executor"):
        value = getattr(args, option)
        if value is not None and value < 1:
            raise ValueError(f"--{option.replace('_', '-')} must be a positive count, not {value}")
    return EngineSettings(
        provider_host=args.provider_host,
        executor=args.executor,
        switch_joins=args.switch_joins,
        runner_cpus=args.runner_cpus,
        parallel=args.parallel,
        backend=args.backend,
        checkpoints=args.checkpoints,
    )
