"""Errors of `plan` that are the user's to fix (shown as one line, no traceback)."""


class GraphvizMissing(Exception):
    """An SVG graph was asked for but Graphviz's `dot` is not installed."""
