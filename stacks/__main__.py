"""`python -m stacks`: the offline companion of the Pulumi CLI."""

import os
import shlex
import sys
from pathlib import Path

_OWN_PACKAGES = {"stacks", "components", "policy", "benchmarks"}


def _outside_the_virtualenv(missing: str) -> int:
    """Say how to get the project's dependencies, instead of a traceback: the usual cause is
    running `python -m stacks` with the system Python, before setup or without activating .venv."""
    project = Path(__file__).resolve().parent.parent
    where = os.path.relpath(project)
    prefix = "" if where == "." else f"{where}/"
    venv = project / ".venv"
    again = shlex.join([f"{prefix}.venv/bin/python", "-m", "stacks", *sys.argv[1:]])
    lines = [
        f"python -m stacks needs the project's virtualenv: this Python ({sys.executable}) lacks "
        f"its dependencies (missing: the Python package {missing!r}).",
        f"  create it once:  bash {prefix}scripts/setup.sh" + ("   (.venv exists already)" if venv.is_dir() else ""),
        f"  then activate:   source {prefix}.venv/bin/activate",
        f"  or run directly: {again}",
    ]
    print("\n".join(lines), file=sys.stderr)
    return 2


# The commands import their heavy dependencies (the Pulumi SDK, pyVmomi) only when they run, so
# the guard covers running the command too, not only importing the CLI.
try:
    from stacks.cli import main

    status = main()
except ModuleNotFoundError as error:
    # Only a third-party package: a module of ours missing is a bug, and its traceback says where.
    if error.name is None or error.name.split(".")[0] in _OWN_PACKAGES:
        raise
    sys.exit(_outside_the_virtualenv(error.name.split(".")[0]))

sys.exit(status)
