"""The `gpucluster` provider plugin: our custom resources' check/diff/create/read/update/delete,
served over gRPC by the Pulumi SDK's provider server (docs/architecture.md, "The gpucluster
provider"). The engine starts it as `python provider/ <engine address>` (PulumiPlugin.yaml)."""
