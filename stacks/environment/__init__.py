"""The environment: a stack file's `vsphere-gpu-cluster:environment`, read, typed and checked.

The bottom layer: imports neither Pulumi nor the wiring or tools. `model` is the typed shape,
`rules` the cross-field checks, `loader` turns a stack file (or the engine's config) into one
validated `Environment` with every problem at once, `collisions` compares environments across
stack files.
"""
