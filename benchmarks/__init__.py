"""Scale benchmarks: stacks of N GPU workers derived from the reference dev (reference/dev.yaml), what planning them
costs next to the bare SDK, and how deep the deployment's dependency graph is.

`python -m benchmarks.scale --help` for the command line; BENCHMARKS.md for the figures.
"""
