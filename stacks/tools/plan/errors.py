"""Errors of `plan` that are the user's to fix (shown as one line, no traceback)."""


class GraphRefused(Exception):
    """The picture asked for with `--graph` cannot be drawn (format, Graphviz missing, a folder)."""


class ManifestFolderRefused(Exception):
    """`OUT/manifests` holds files an earlier plan did not write; plan will not delete them."""


class PlanOptionRefused(Exception):
    """A `plan` option's value is unusable (e.g. a `--durations` file with an unknown name)."""
