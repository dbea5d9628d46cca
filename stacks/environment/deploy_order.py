"""The stacks `deploy.yml` deploys, in their promotion order: `.github/deploy-order`, declared once.

One stack name a line, blank lines and `#` comments ignored. The deploy workflow's `order` job
runs this file as a script, before any virtualenv exists: standard library only, and nothing from
the `stacks` package (whose `__init__` would need it). `validate` reads the same list to hold a
deployed stack to what a deployment needs (`deployed_stack_problems`).

    python3 stacks/environment/deploy_order.py [PROJECT_DIR]   # JSON list on stdout, or exit 1 naming the problems
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ORDER_FILE = Path(".github") / "deploy-order"
STACK_NAME = re.compile(r"^[a-z0-9][-a-z0-9]*$")
"""A stack name as the workflows take it (scripts/pick_stacks.sh): it reaches shells and environment names."""
SIMULATOR_STACK = "sim"


class DeployOrderError(ValueError):
    """The order file names something that cannot be deployed; the message lists every problem."""


def read_deploy_order(project_dir: Path) -> list[str]:
    """The listed stacks in order ([] when the project has no order file: nothing is deployed)."""
    path = project_dir / ORDER_FILE
    if not path.is_file():
        return []
    stacks: list[str] = []
    problems: list[str] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        name = raw.split("#", 1)[0].strip()
        if not name:
            continue
        where = f"{ORDER_FILE}:{number}"
        if not STACK_NAME.match(name):
            problems.append(f"{where}: {name!r} is not a stack name (lower-case letters, digits, '-')")
        elif name == SIMULATOR_STACK:
            problems.append(f"{where}: `sim` is the bundled vCenter simulator's stack: there is nothing to deploy it to")
        elif name in stacks:
            problems.append(f"{where}: {name} is listed twice; each stack deploys once, in one place of the order")
        elif not (project_dir / f"Pulumi.{name}.yaml").is_file():
            problems.append(f"{where}: {name} has no stack file Pulumi.{name}.yaml: add it, or remove the line")
        else:
            stacks.append(name)
    if problems:
        raise DeployOrderError("\n".join(problems))
    return stacks


def main(argv: list[str]) -> int:
    project_dir = Path(argv[1]) if len(argv) > 1 else Path.cwd()
    try:
        stacks = read_deploy_order(project_dir)
    except DeployOrderError as error:
        print(f"deploy order: {error}", file=sys.stderr)
        return 1
    print(json.dumps(stacks))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
