"""The stack file's cross-field rules, one module per subject. Each module registers its rules on
import (`stacks.environment.registry`), so importing this package brings in all of them; `check`
then runs every one and reports every problem at once."""

from stacks.environment.registry import RULES, Path, Problem, check, format_path
from stacks.environment.rules import (  # noqa: F401  (imported to register their rules)
    components,
    general,
    kubernetes,
    mirror,
    replicas,
    software,
    tuning,
    vm_size,
    vsphere,
)

__all__ = ["RULES", "Path", "Problem", "check", "format_path"]
