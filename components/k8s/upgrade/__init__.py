"""Kubernetes version changes: which versions may follow which, and the upgrade steps around the node rollout."""
