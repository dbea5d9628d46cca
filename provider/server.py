"""The `gpucluster` provider: the SDK's provider server (`pulumi.provider.experimental`, async
handlers on grpc.aio, no worker pool of its own; pulumi/provider/experimental/server.py) with a
`Provider` that dispatches by type token to each kind's handlers (provider/kinds.py).

Decisions, each with its reason (docs/architecture.md, "The gpucluster provider"):
- Concurrency: the handlers block, so each create, read, update and delete runs on a
  ThreadPoolExecutor of `maxConcurrentOperations` threads (default 640), created at `Configure`.
  The dynamic provider host had four (pulumi/dynamic/__main__.py, `ThreadPoolExecutor(max_workers=4)`).
  Check and Diff run on a small pool of their own (provider/pools.py): the engine waits for them
  on its step loop, and they must not queue behind hundreds of creates.
- Cancel: queued operations are dropped, running ones end cleanly (provider/pools.py).
- Preview: `supports_preview=False`, as the dynamic host declared: the engine then never calls
  Create or Update during `pulumi preview` (pulumi/pulumi pkg/resource/plugin/provider_plugin.go),
  and the handlers need no side-effect-free path. Check and Diff run in previews as before.
- Secrets: `accept_secrets=True`; secret inputs are unwrapped for the handlers and their keys are
  secret again in the answer (provider/values.py).
- Old dynamic state: `__*` keys (`__provider`) are dropped before any handler sees them, so a
  state written by the dynamic provider diffs clean; the next Read or Update writes it back
  without them.
- Logs: the engine hides a plugin's stdout and stderr (pulumi/pulumi
  sdk/go/common/resource/plugin/plugin.go); `pulumi.log` is pointed at the engine's Log service.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi.provider.experimental import provider as p
from pulumi.provider.experimental.property_value import PropertyValue

from components import resource_handlers as handlers
from components.gpucluster_resource import DEFAULT_MAX_CONCURRENT_OPERATIONS
from components.vcenter.settings import (
    CONFIG_ALLOW_UNVERIFIED_SSL,
    CONFIG_PASSWORD,
    CONFIG_SERVER,
    CONFIG_USER,
)
from components.vsphere.provider_base import CONFIG_OPERATION_TIMEOUT
from provider.kinds import Kind, make_kinds
from provider.pools import Pools
from provider.switch_batch import DEFAULT_WINDOW_S
from provider.values import plain_map, property_map

VERSION = "1.0.0"

#: Provider inputs (GpuclusterProvider's, components/gpucluster_resource.py) -> the stack config
#: keys the handlers read (components/vcenter/settings.py).
_CONNECTION_KEYS = {
    "vsphereServer": CONFIG_SERVER,
    "user": CONFIG_USER,
    "password": CONFIG_PASSWORD,
    "allowUnverifiedSsl": CONFIG_ALLOW_UNVERIFIED_SSL,
    # The wall-clock bound of each vCenter operation (components/vsphere/provider_base.py).
    "vcenterTimeoutSeconds": CONFIG_OPERATION_TIMEOUT,
}


class UnknownResourceType(Exception):
    pass


def _pool_size(value: Any) -> int:
    if value is None or value == "":
        return DEFAULT_MAX_CONCURRENT_OPERATIONS
    size = int(float(value))
    if size < 1:
        raise ValueError(f"maxConcurrentOperations must be at least 1, got {value!r}")
    return size


class GpuclusterProvider(p.Provider):
    def __init__(self, *, switch_window_s: float = DEFAULT_WINDOW_S) -> None:
        self.switch_window_s = switch_window_s
        self.pools = Pools(DEFAULT_MAX_CONCURRENT_OPERATIONS)
        self._kinds: dict[str, Kind] = make_kinds(
            self.pools, handlers.ConfigureRequest({}), switch_window_s=switch_window_s
        )

    @property
    def max_workers(self) -> int:
        return self.pools.size

    def kind(self, urn: str) -> Kind:
        token = urn.split("::")[-2] if "::" in urn else ""
        kind = self._kinds.get(token)
        if kind is None:
            raise UnknownResourceType(f"the gpucluster provider has no resource type {token!r} (URN {urn})")
        return kind

    async def check_config(self, request: p.CheckRequest) -> p.CheckResponse:
        failures = []
        try:
            _pool_size(_plain(request.new_inputs).get("maxConcurrentOperations"))
        except ValueError as exc:
            failures.append(p.CheckFailure("maxConcurrentOperations", str(exc)))
        return p.CheckResponse(inputs=request.new_inputs, failures=failures)

    async def diff_config(self, request: p.DiffRequest) -> p.DiffResponse:
        # Never a replacement: new credentials or another pool size change how the plugin talks
        # to vCenter, not what exists there. This is also what the engine asks when a resource
        # moves to this provider from the dynamic provider (pulumi/pulumi step_generator.go
        # `providerChanged`, explicit providers included since PR 18509): "no" keeps it.
        # `changes` stays unknown: the SDK's server copies it into the response's enum as it is
        # (experimental/server.py `DiffConfig`), where True would read as DIFF_NONE; with
        # DIFF_UNKNOWN the engine compares the provider's inputs itself.
        return p.DiffResponse(changes=None, replaces=[])

    async def configure(self, request: p.ConfigureRequest) -> p.ConfigureResponse:
        args = _plain(request.args)
        config = {key: args.get(name) for name, key in _CONNECTION_KEYS.items()}
        self.pools = self.pools.resized(_pool_size(args.get("maxConcurrentOperations")))
        self._kinds = make_kinds(self.pools, handlers.ConfigureRequest(config), switch_window_s=self.switch_window_s)
        return p.ConfigureResponse(
            accept_secrets=True, supports_preview=False, accept_resources=False, accept_outputs=False
        )

    async def cancel(self) -> None:
        """The engine's Cancel (a first Ctrl-C, a CI cancellation's SIGINT): queued operations
        never start, running ones finish and report; Check and Diff still answer."""
        self.pools.cancel()

    async def check(self, request: p.CheckRequest) -> p.CheckResponse:
        olds, _ = plain_map(request.old_inputs)
        news, secret = plain_map(request.new_inputs)
        result = await self.kind(request.urn).check(olds, news)
        return p.CheckResponse(
            inputs=property_map(result.inputs, secret),
            failures=[p.CheckFailure(f.property, f.reason) for f in result.failures],
        )

    async def diff(self, request: p.DiffRequest) -> p.DiffResponse:
        olds, _ = plain_map(request.old_state)
        news, _ = plain_map(request.new_inputs)
        result = await self.kind(request.urn).diff(request.resource_id, olds, news)
        changed = sorted(key for key in news if news[key] != olds.get(key))
        replaces = list(result.replaces or [])
        changes = bool(changed) if result.changes is None else bool(result.changes)
        return p.DiffResponse(
            changes=changes,
            replaces=replaces,
            stables=list(result.stables or []),
            delete_before_replace=bool(result.delete_before_replace),
            diffs=sorted(set(replaces) | (set(changed) if changes else set())),
        )

    async def create(self, request: p.CreateRequest) -> p.CreateResponse:
        props, secret = plain_map(request.properties)
        if request.preview:  # not asked for (supports_preview=False); answer without side effects
            return p.CreateResponse(resource_id="", properties=property_map(props, secret))
        result = await self.kind(request.urn).create(props)
        return p.CreateResponse(resource_id=result.id, properties=property_map(result.outs, secret))

    async def read(self, request: p.ReadRequest) -> p.ReadResponse:
        props, secret = plain_map(request.properties)
        inputs, input_secret = plain_map(request.inputs)
        if not props:  # an import: the engine passes only inputs
            props, secret = inputs, input_secret
        result = await self.kind(request.urn).read(request.resource_id, props)
        if not result.id:
            return p.ReadResponse(resource_id="", properties={}, inputs={})
        return p.ReadResponse(
            resource_id=result.id,
            properties=property_map(result.outs, secret | input_secret),
            inputs=property_map(inputs, input_secret),
        )

    async def update(self, request: p.UpdateRequest) -> p.UpdateResponse:
        olds, old_secret = plain_map(request.olds)
        news, secret = plain_map(request.news)
        if request.preview:
            return p.UpdateResponse(properties=property_map(news, secret))
        result = await self.kind(request.urn).update(request.resource_id, olds, news)
        return p.UpdateResponse(properties=property_map(result.outs, secret | old_secret))

    async def delete(self, request: p.DeleteRequest) -> None:
        props, _ = plain_map(request.properties)
        await self.kind(request.urn).delete(request.resource_id, props)


def _plain(props: Mapping[str, PropertyValue]) -> dict[str, Any]:
    return plain_map(props)[0]
