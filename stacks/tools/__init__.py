"""The commands of `python -m stacks`, one package each (validate, plan, schema, clone, preflight,
verify; the simulator runs as `python -m stacks.tools.simulator`), and the libraries only they use
(admission, availability, deploy_time). Each command package exposes `register(commands)` from its
`__init__`; `stacks.cli` registers them and nothing here imports `stacks.cli`. They sit on top:
they import the environment, the wiring and the program; nothing imports them but the CLI, tests
and benchmarks."""
