"""Per-environment configuration and the offline tools, in three layers:

- `stacks.environment`: the stack file's typed model, its rules, the loader, cross-stack collisions;
- `stacks.wiring`: from a validated environment to typed component arguments (no resources);
- `stacks.tools`: `python -m stacks` (validate, plan, schema, clone, preflight).

Each layer imports only the ones above it in this list.
"""

from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
"""The Pulumi project's folder: `Pulumi.yaml`, `__main__.py` and the `Pulumi.<stack>.yaml` files."""
