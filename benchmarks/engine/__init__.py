"""The engine's side of a deployment, measured with real processes (issue 31).

- `python -m benchmarks.engine.concurrency`: starts a provider host (the SDK's dynamic host, or the
  SDK's provider server with an executor, or any server command) and drives it over gRPC as the
  engine does, against the vCenter simulator with per-call delays; reports how many operations ran
  at once and how many per second. `--write benchmarks/engine/provider_concurrency.json` stores what
  the deployment model reads.
- `python -m benchmarks.engine.checkpoint`: the size of a stack's state and the time to serialise
  and write it whole, as a DIY backend does per step, on `file://` and on an S3 API (moto's server).

Plugging in another provider server (e.g. the real plugin): it must print its gRPC port on the
first stdout line and serve Configure, Check, Create and Diff for a type token; then

    python -m benchmarks.engine.concurrency --hosts "" \\
        --server ".venv/bin/python provider" --type gpucluster:vsphere:PvrdmaHostSettings [--executor N]

(`python provider/ <engine address>` is how the Python language host starts the gpucluster plugin:
provider/__main__.py.) The engine's address is appended to the command as its last argument (as
the engine launches a plugin). Configure gets the explicit provider's inputs, as the engine sends
them (`vsphereServer`, `user`, `password`; `--executor N` adds `maxConcurrentOperations`, else the
plugin's default pool). The resources' inputs are `host_name`, `vmknic_device` and
`allowed_network` (workload.inputs). The real plugin's creates carry no start and finish stamps,
so its rows give throughput, not how many ran at once.
"""
