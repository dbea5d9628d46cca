"""Rolling changes: one node at a time behind gates, each drained before its VM goes."""
