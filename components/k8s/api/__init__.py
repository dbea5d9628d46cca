"""Talking to the Kubernetes API server: the client, the readiness probe and the resource that waits for it."""
