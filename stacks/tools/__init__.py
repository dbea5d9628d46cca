"""The commands of `python -m stacks`, one package each: validate, plan, schema, clone, comment, preflight,
images, verify (and the simulator, run as `python -m stacks.tools.simulator`). Each exposes
`register(commands)` from its `__init__`; `stacks.cli` registers them and nothing here imports
`stacks.cli`. What only one command uses lives inside that command's package (plan/admission/,
plan/deploy_time/, verify/availability/). They sit on top: they import the environment, the wiring
and the program; nothing imports them but the CLI, tests and benchmarks."""
