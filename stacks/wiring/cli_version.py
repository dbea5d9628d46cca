"""The oldest Pulumi CLI this program may run under, enforced where the CLI can be asked.

3.151.0: the first release with pulumi/pulumi PR 18509 (CHANGELOG, 3.151.0 "Bug Fixes": "The engine
will now call DiffConfig on explict providers to decide replace semantics"). Before it, moving
a stack deployed with the dynamic providers to the gpucluster plugin replaces every one of our
resources, i.e. deletes them through the old provider: hosts off the switch, nodes drained, etcd
members removed (docs/deploy.md, "Moving from the dynamic providers").

Two checks, because neither covers every CLI alone:
- `requiredPulumiVersion` in Pulumi.yaml: the CLI refuses to run the project; only CLIs since
  pulumi/pulumi PR 21627 (2026) read that key, older ones ignore it (the project schema allows
  unknown keys: sdk/go/common/workspace/project.json, `additionalProperties: true`).
- `require_pulumi_version` here, the engine's `RequirePulumiVersion` RPC, before the program
  registers anything: every CLI that has the RPC answers it; one without it fails the call, and the
  SDK says to upgrade (pulumi/runtime/settings.py).
"""

from __future__ import annotations

import pulumi
from pulumi.runtime import settings

MINIMUM_CLI = "3.151.0"
REQUIRED_RANGE = f">={MINIMUM_CLI}"


def require_minimum_cli() -> None:
    """Fail the program with one line naming the minimum and why, before any registration.

    Under the SDK's mocks (`python -m stacks plan`, tests) there is no CLI to ask: nothing to check.
    """
    engine = settings.get_engine()
    if engine is None or not hasattr(engine, "RequirePulumiVersion"):
        return
    try:
        settings.require_pulumi_version(REQUIRED_RANGE)
    except Exception as exc:
        raise pulumi.RunError(
            f"this project needs Pulumi CLI {MINIMUM_CLI} or later (older CLIs replace our resources when "
            f"they move to the gpucluster plugin: docs/deploy.md); `pulumi version`, then upgrade ({exc})"
        ) from None
