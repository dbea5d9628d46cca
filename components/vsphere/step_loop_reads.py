"""vCenter reads made from Check or Diff, bounded so they never hold up the engine's step loop.

The engine calls Check and Diff one registration at a time on its step-generation loop and waits
for each answer (pulumi/pulumi pkg/resource/deploy/step_generator.go; provider/pools.py): a read
that waits on vCenter holds up every registration after it, VMs included. Two of ours read there,
and only as an early warning that a later operation repeats: `TemplateReplica.diff` looks for drift
of the live copy (`pulumi refresh` and the copy's own `update` read it too), and
`HostGraphicsMode.check` with manage=false verifies the host's mode (`create`/`update` verify it
again before anything depends on the host). So each read gets `STEP_LOOP_READ_S`, login included
(the operation deadline of components/vcenter/deadline.py cuts every request at it), and past it,
or on any vCenter error, the answer is "not read": the caller goes on without it and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from components.vcenter.errors import VsphereError
from components.vsphere.provider_base import RetryPolicy, VsphereProvider

T = TypeVar("T")

STEP_LOOP_READ_S = 0.75
"""A Check or Diff answers within a second (tests/provider/test_step_loop.py) with gRPC's and the
handler's own time on top of this read."""
STEP_LOOP_READ = RetryPolicy(
    attempts=1, max_total=STEP_LOOP_READ_S, login_timeout=STEP_LOOP_READ_S, http_timeout=STEP_LOOP_READ_S
)


class NotRead:
    """The read did not finish within its budget, or vCenter refused it: `why` says which."""

    def __init__(self, why: str) -> None:
        self.why = why


def read_on_step_loop(provider: VsphereProvider, fn: Callable[[Any], T], *, what: str) -> T | NotRead:
    """`fn(service_instance)` within `STEP_LOOP_READ_S`, or `NotRead` (never raises for vCenter)."""
    try:
        return provider.run(fn, what=what, retry=STEP_LOOP_READ)
    except (VsphereError, OSError) as exc:  # OSError: TimeoutError/DeadlineExceeded, a refused socket
        return NotRead(f"{what}: not read within {STEP_LOOP_READ_S:g} s on the engine's step loop ({exc})")
