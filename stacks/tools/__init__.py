"""The offline tools behind `python -m stacks`: the command line, plan (the program under the
SDK's mock runtime), clone and preflight. They sit on top: they import the environment, the
wiring and the program; nothing imports them but tests and benchmarks."""
