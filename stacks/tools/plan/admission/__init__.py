"""Would each workload the plan deploys be admitted and scheduled where it is meant to run (used by `plan`)."""
