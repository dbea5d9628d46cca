"""Each resource kind the plugin serves: its type token and its handlers, run off the event loop.

The handlers (`components.resource_handlers.ResourceHandlers` subclasses, next to each resource's
declaration for now) block: pyVmomi's SOAP calls, kubectl, HTTP polls. Each create, read, update
and delete runs on the plugin's operations pool, so as many run at once as the pool has threads; a
blocking call on the event loop itself would serialise every resource of the stack. Check and Diff
run on a small pool of their own (provider/pools.py): the engine waits for them on its step loop,
so they must never queue behind the long operations.

`DvsHostMember` is the exception for create, update and delete: its changes go through the
per-switch group commit (`provider/switch_batch.py`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from typing import Any, TypeVar

from components import resource_handlers as handlers
from components.k8s.api.ready import ApiServerReady, ApiServerReadyProvider
from components.k8s.etcd.member import ControlPlaneMember, ControlPlaneMemberProvider
from components.k8s.join.joined import NodeJoined, NodeJoinedProvider
from components.k8s.join.rotation import JoinTokenRotation, JoinTokenRotationProvider
from components.k8s.rollout.drain import NodeDrain, NodeDrainProvider
from components.k8s.rollout.rollout import (
    RolloutGate,
    RolloutGateProvider,
    RolloutGeneration,
    RolloutGenerationProvider,
    RolloutSettle,
    RolloutSettleProvider,
)
from components.k8s.upgrade.upgrade import ClusterUpgrade, ClusterUpgradeProvider
from components.vsphere.dvs_host_member import DvsHostMember, DvsHostMemberProvider, switch_lock
from components.vsphere.dvs_member_batch import MemberChange, Outcome, apply_member_changes
from components.vsphere.guestinfo_scrub import GuestinfoScrub, GuestinfoScrubProvider
from components.vsphere.host_graphics.resource import HostGraphicsMode, HostGraphicsModeProvider
from components.vsphere.pki_delivery import InitPkiDelivery, InitPkiDeliveryProvider
from components.vsphere.pvrdma_host import PvrdmaHostSettings, PvrdmaHostSettingsProvider
from components.vsphere.template_copies.replica import TemplateReplica, TemplateReplicaProvider
from components.vsphere.vgpu.attachment import VgpuAttachment, VgpuAttachmentProvider
from provider.pools import Cancelled, Pools
from provider.switch_batch import DEFAULT_WINDOW_S, SwitchBatcher

T = TypeVar("T")

HANDLERS: Mapping[str, Callable[[], handlers.ResourceHandlers]] = {
    DvsHostMember.TYPE: DvsHostMemberProvider,
    PvrdmaHostSettings.TYPE: PvrdmaHostSettingsProvider,
    HostGraphicsMode.TYPE: HostGraphicsModeProvider,
    TemplateReplica.TYPE: TemplateReplicaProvider,
    VgpuAttachment.TYPE: VgpuAttachmentProvider,
    GuestinfoScrub.TYPE: GuestinfoScrubProvider,
    InitPkiDelivery.TYPE: InitPkiDeliveryProvider,
    ApiServerReady.TYPE: ApiServerReadyProvider,
    ClusterUpgrade.TYPE: ClusterUpgradeProvider,
    JoinTokenRotation.TYPE: JoinTokenRotationProvider,
    NodeJoined.TYPE: NodeJoinedProvider,
    ControlPlaneMember.TYPE: ControlPlaneMemberProvider,
    NodeDrain.TYPE: NodeDrainProvider,
    RolloutGeneration.TYPE: RolloutGenerationProvider,
    RolloutGate.TYPE: RolloutGateProvider,
    RolloutSettle.TYPE: RolloutSettleProvider,
}
"""Type token -> the kind's handlers. Tokens are frozen once released: the state keys on them."""


class Kind:
    """One kind's handlers: Check and Diff on the step-loop pool, the rest on the operations pool
    (each with the caller's context, so `pulumi.log` reaches the engine from the worker thread)."""

    def __init__(self, impl: handlers.ResourceHandlers, pools: Pools) -> None:
        self.impl = impl
        self.pools = pools

    async def _on(self, executor: Executor, fn: Callable[..., T], *args: Any) -> T:
        ctx = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(executor, functools.partial(ctx.run, fn, *args))
        except RuntimeError as exc:  # "cannot schedule new futures after shutdown"
            if self.pools.cancelled:
                raise Cancelled("the update was cancelled: this operation was not started") from exc
            raise
        except asyncio.CancelledError:
            if self.pools.cancelled:  # dropped from the queue by `cancel`: say so, not a bare cancel
                raise Cancelled("the update was cancelled before this operation started") from None
            raise

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """A long operation: on the operations pool."""
        return await self._on(self.pools.operations, fn, *args)

    async def check(self, olds: dict[str, Any], news: dict[str, Any]) -> handlers.CheckResult:
        return await self._on(self.pools.step_loop, self.impl.check, olds, news)

    async def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        return await self._on(self.pools.step_loop, self.impl.diff, id_, olds, news)

    async def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        return await self.call(self.impl.create, props)

    async def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        return await self.call(self.impl.read, id_, props)

    async def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        return await self.call(self.impl.update, id_, olds, news)

    async def delete(self, id_: str, props: dict[str, Any]) -> None:
        await self.call(self.impl.delete, id_, props)


class BatchedSwitchMembers(Kind):
    """`DvsHostMember` with its joins, uplink edits and leaves batched per switch."""

    impl: DvsHostMemberProvider

    def __init__(self, impl: DvsHostMemberProvider, pools: Pools, *, window_s: float = DEFAULT_WINDOW_S) -> None:
        super().__init__(impl, pools)
        self.batcher = SwitchBatcher(self._run_batch, window_s=window_s)

    async def _run_batch(self, switch_uuid: str, changes: list[MemberChange]) -> dict[str, Outcome]:
        names = ", ".join(change.host_name for change in changes)

        def run() -> dict[str, Outcome]:
            # The thread lock keeps out any other path of this process that edits the switch.
            with switch_lock(switch_uuid):
                return self.impl.run(
                    lambda si: apply_member_changes(si, switch_uuid, changes),
                    what=f"memberships of hosts {names} in switch {switch_uuid}",
                )

        return await self.call(run)

    async def _apply(self, props: dict[str, Any]) -> dict[str, Any]:
        host_name, uuid = props["host_name"], props["switch_uuid"]
        vmnics = tuple(sorted(props["vmnics"]))
        await self.batcher.submit(uuid, MemberChange(host_name, vmnics))
        return {"host_name": host_name, "switch_uuid": uuid, "vmnics": list(vmnics)}

    async def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        outs = await self._apply(props)
        return handlers.CreateResult(id_=f"{props['switch_uuid']}:{props['host_name']}", outs=outs)

    async def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        return handlers.UpdateResult(outs=await self._apply(news))

    async def delete(self, id_: str, props: dict[str, Any]) -> None:
        await self.batcher.submit(props["switch_uuid"], MemberChange(props["host_name"], None))


def make_kinds(pools: Pools, config: handlers.ConfigureRequest, *, switch_window_s: float) -> dict[str, Kind]:
    """Every kind's handlers, configured."""
    kinds: dict[str, Kind] = {}
    for token, factory in HANDLERS.items():
        impl = factory()
        impl.configure(config)
        if isinstance(impl, DvsHostMemberProvider):
            kinds[token] = BatchedSwitchMembers(impl, pools, window_s=switch_window_s)
        else:
            kinds[token] = Kind(impl, pools)
    return kinds
