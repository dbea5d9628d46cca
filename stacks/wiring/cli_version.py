"""The oldest Pulumi CLI this program may run under, checked where the CLI can be asked.

3.151.0: the first release with pulumi/pulumi PR 18509 (CHANGELOG, 3.151.0 "Bug Fixes": "The engine
will now call DiffConfig on explict providers to decide replace semantics"). Before it, moving
a stack deployed with the dynamic providers to the gpucluster plugin replaces every one of our
resources, i.e. deletes them through the old provider: hosts off the switch, nodes drained, etcd
members removed (docs/deploy.md, "Moving from the dynamic providers").

What a CLI can be asked, by release (pulumi/pulumi, proto/pulumi/engine.proto and CHANGELOG):
- 3.216.0 added the engine's `CheckPulumiVersion` RPC (PR 21429); 3.217.0 renamed it
  `RequirePulumiVersion` (PR 21528), the name the Python SDK calls (pulumi/runtime/settings.py,
  `require_pulumi_version`). A CLI before 3.217 answers that name UNIMPLEMENTED.
- 3.219.0 made the CLI itself honour `requiredPulumiVersion` in Pulumi.yaml (PR 21627); older CLIs
  ignore the key (the project schema allows unknown keys: sdk/go/common/workspace/project.json,
  `additionalProperties: true`).

So no CLI can say whether it is older than 3.151: every CLI that answers is 3.216 or later. An
engine without `RequirePulumiVersion` is a CLI before 3.217, which may well be 3.151 or later: the
program runs (it failed every CLI from 3.151 to 3.216 before, issue 51), and `pulumi version`
before the move stays the user's check (docs/deploy.md). The ask still runs, so that a floor raised
to 3.217 or later is enforced at once, the silent engine included (it is older than that floor).
"""

from __future__ import annotations

import grpc
import pulumi
from pulumi.runtime import settings
from pulumi.runtime.proto import engine_pb2

MINIMUM_CLI = "3.151.0"
REQUIRED_RANGE = f">={MINIMUM_CLI}"
# The first CLI that answers `RequirePulumiVersion` (pulumi/pulumi PR 21528, released in 3.217.0).
FIRST_CLI_ASKED = "3.217.0"


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _too_old(reason: str) -> pulumi.RunError:
    return pulumi.RunError(
        f"this project needs Pulumi CLI {MINIMUM_CLI} or later (older CLIs replace our resources when "
        f"they move to the gpucluster plugin: docs/deploy.md); `pulumi version`, then upgrade ({reason})"
    )


def require_minimum_cli() -> None:
    """Fail the program with one line naming the minimum and why, before any registration.

    Under the SDK's mocks (`python -m stacks plan`, tests) there is no CLI to ask: nothing to check.
    """
    engine = settings.get_engine()
    if engine is None or not hasattr(engine, "RequirePulumiVersion"):
        return
    try:
        # The SDK's own call (settings.require_pulumi_version), made here to tell the engine that
        # lacks the RPC (UNIMPLEMENTED, which the SDK turns into a plain Exception) from a refusal.
        engine.RequirePulumiVersion(engine_pb2.RequirePulumiVersionRequest(pulumi_version_range=REQUIRED_RANGE))
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
            raise _too_old(str(exc.details())) from None
        if _release(MINIMUM_CLI) >= _release(FIRST_CLI_ASKED):
            raise _too_old(f"this CLI predates {FIRST_CLI_ASKED}: it cannot answer RequirePulumiVersion") from None
        pulumi.log.debug(
            f"the Pulumi CLI predates {FIRST_CLI_ASKED} and cannot be asked its version; "
            f"this project needs {MINIMUM_CLI} or later (docs/deploy.md)"
        )
