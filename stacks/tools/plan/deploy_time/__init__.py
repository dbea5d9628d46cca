"""The deployment-time model over a plan's resource graph: durations, the simulation, words, and rolling changes (used by `plan` and benchmarks)."""
