"""Which files of a project folder are stack files: `Pulumi.<stack>.yaml` with a plain stack name.

A stack name here is lower-case letters, digits and '-', starting with a letter or digit: the
names the workflows plan and deploy (scripts/pick_stacks.sh keeps the same pattern). Anything else
beside the project, a backup such as `Pulumi.lab.good.yaml` or `Pulumi.lab.yaml.bak`, an editor's
copy, is no stack: it takes no part in the collision checks (a backup collides with everything its
original names), the list of existing stacks, or `clone`. The one place that decides it.
"""

from __future__ import annotations

import re
from pathlib import Path

STACK_NAME = re.compile(r"[a-z0-9][-a-z0-9]*")
_STACK_FILE = re.compile(r"Pulumi\.(?P<stack>[a-z0-9][-a-z0-9]*)\.yaml")


def stack_of(path: Path) -> str | None:
    """The stack `path` is the file of, or None when its name is not `Pulumi.<stack>.yaml`."""
    match = _STACK_FILE.fullmatch(path.name)
    return match["stack"] if match else None


def stack_files(project_dir: Path) -> dict[str, Path]:
    """Stack name -> its `Pulumi.<stack>.yaml` in the project folder, by name."""
    found = {}
    for path in sorted(project_dir.glob("Pulumi.*.yaml")):
        stack = stack_of(path)
        if stack is not None:
            found[stack] = path
    return found
