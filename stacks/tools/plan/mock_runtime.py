"""Run a Pulumi program under the SDK's own mock runtime and record what it registers.

This is what `python -m stacks plan` and the tests stand on: no Pulumi CLI, no vCenter, no
cluster. The SDK's `MockMonitor` already receives every `RegisterResource` request; we subclass it
only to keep what the stock monitor throws away (parent, custom flag, dependencies) and to keep
secret inputs wrapped so they can be redacted instead of printed.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import inspect
import runpy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks, rpc
from pulumi.runtime import settings as runtime_settings
from pulumi.runtime.config import set_all_config
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from stacks.tools.plan.mock_values import fake_invoke_result, fake_outputs, fake_resource_id

SECRET_MARK = "[secret]"
"""What every secret value is replaced with in anything we write or print."""

# Internal fields a dynamic resource carries: the pickled provider is large and says nothing a
# reviewer needs; `__pulumi_*` keys are SDK bookkeeping.
_INTERNAL_INPUT_KEYS = ("__provider",)


@dataclass
class RecordedResource:
    """One resource the program registered, as the engine would have seen the request."""

    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    dependencies: list[str]
    inputs: dict[str, Any]
    provider: str | None = None
    protect: bool = False
    ignore_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool = False
    source_position: str | None = None
    """Where the program declared it (`file://...#line`), as the engine keeps it in the state."""
    version: str = ""
    deleted_with: str = ""
    """The resource whose deletion takes this one with it (the engine then skips its delete)."""
    alias_types: list[str] = field(default_factory=list)
    """Types the resource was registered under before (its aliases' types): the engine finds its
    old state under them instead of creating it anew."""
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    """Per input property, the resources its value came from (the engine's `propertyDependencies`:
    what it diffs as unknown when one of them is replaced delete-first)."""
    """The provider plugin version the registration asks for (typed provider classes send theirs)."""

    @property
    def resource_dependencies(self) -> list[str]:
        """`dependencies` without provider resources (every `gpucluster:*` resource waits on the
        one `pulumi:providers:gpucluster`): what the program itself made it wait for."""
        return [
            urn for urn in self.dependencies if "$pulumi:providers:" not in urn and "::pulumi:providers:" not in urn
        ]

    def redacted_inputs(self) -> dict[str, Any]:
        """Inputs with every secret replaced by `SECRET_MARK` and internal keys dropped."""
        return {key: redact(value) for key, value in self.inputs.items() if key not in _INTERNAL_INPUT_KEYS}

    def plain_inputs(self) -> dict[str, Any]:
        """Inputs with secrets unwrapped: for in-process assertions only, never for output."""
        return {key: unwrap(value) for key, value in self.inputs.items()}


def redact(value: Any) -> Any:
    """Replace every secret inside `value` (at any depth) with `SECRET_MARK`."""
    if rpc.is_rpc_secret(value):
        return SECRET_MARK
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, pulumi.Output | pulumi.Resource):
        return repr(value)
    return value


def unwrap(value: Any) -> Any:
    """Strip secret wrappers at any depth, keeping the values."""
    if rpc.is_rpc_secret(value):
        return unwrap(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


def contains_secret(value: Any) -> bool:
    if rpc.is_rpc_secret(value):
        return True
    if isinstance(value, dict):
        return any(contains_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_secret(v) for v in value)
    return False


class _PlanMocks(mocks.Mocks):
    """Answers resource registrations and provider functions with plausible fake values."""

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict]:
        resource_id = args.resource_id or fake_resource_id(args.typ, args.name, args.inputs)
        state = dict(args.inputs)
        state.update(fake_outputs(args.typ, args.name, args.inputs))
        return resource_id, state

    def call(self, args: mocks.MockCallArgs) -> tuple[dict, list[tuple[str, str]] | None]:
        return fake_invoke_result(args.token, args.args), []


class RecordingMonitor(mocks.MockMonitor):
    """The SDK's mock monitor, keeping parent, custom flag, options and dependencies."""

    def __init__(self, mocks_impl: mocks.Mocks) -> None:
        super().__init__(mocks_impl)
        self.recorded: list[RecordedResource] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        dependencies = set(request.dependencies)
        for property_deps in request.propertyDependencies.values():
            dependencies.update(property_deps.urns)
        # The engine also waits for a resource's provider (a reference is "<urn>::<id>");
        # components carry theirs in the `providers` map.
        for reference in [request.provider, *request.providers.values()]:
            if reference:
                dependencies.add(reference.rsplit("::", 1)[0])
        self.recorded.append(
            RecordedResource(
                urn=response.urn,
                type=request.type,
                name=request.name,
                parent=request.parent or None,
                custom=bool(request.custom),
                dependencies=sorted(dependencies),
                inputs=rpc.deserialize_properties(request.object),
                provider=request.provider or None,
                protect=bool(request.protect),
                ignore_changes=list(request.ignoreChanges),
                delete_before_replace=bool(request.deleteBeforeReplace),
                source_position=_source_position(request),
                version=request.version,
                deleted_with=request.deletedWith,
                alias_types=[_alias_type(alias) for alias in request.aliases]
                + [urn.split("::")[-2].rsplit("$", 1)[-1] for urn in request.aliasURNs],
                property_dependencies={
                    key: sorted(deps.urns) for key, deps in request.propertyDependencies.items() if deps.urns
                },
            )
        )
        return response


def _alias_type(alias: Any) -> str:
    """The type an alias names (a spec without one keeps the resource's own: "")."""
    if alias.urn:
        return str(alias.urn.split("::")[-2].rsplit("$", 1)[-1])
    return str(alias.spec.type)


def _source_position(request: Any) -> str | None:
    if not request.HasField("sourcePosition"):
        return None
    return f"{request.sourcePosition.uri}#{request.sourcePosition.line}"


@dataclass
class ProgramRun:
    """Everything a mocked run of the program produced."""

    resources: list[RecordedResource]
    stack_outputs: dict[str, Any]

    def by_type(self, type_token: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.type == type_token]

    def named(self, name: str) -> RecordedResource:
        matches = [r for r in self.resources if r.name == name]
        if len(matches) != 1:
            raise KeyError(f"expected one resource named {name!r}, found {len(matches)}")
        return matches[0]

    def urn_of(self, name: str) -> str:
        return self.named(name).urn


def run_program(
    program: Callable[[], None],
    *,
    project: str,
    stack: str,
    config: Mapping[str, str],
    secret_keys: list[str],
    preview: bool = False,
) -> ProgramRun:
    """Run `program` under mocks with the given config; return what it registered. `preview`:
    as `pulumi preview` runs it (an empty id from the mocks is then an unknown id, as a resource
    that does not exist yet has in a real preview).

    Each run happens in a fresh `contextvars` context: the SDK keeps its settings, config and
    root stack in context variables, so runs never leak into each other (tests run many).

    Each run also gets an event loop of its own, made before its context is entered and closed
    after it. The SDK would otherwise make the thread's loop on its first await, inside the run's
    context, and the loop's self-pipe reader would keep a copy of that context for the life of the
    thread: the root stack, its exports, and through them every resource an export mentions and
    all of their Outputs (440,000 objects after a 512-worker plan) would outlive the run.
    """
    # The cyclic garbage collector is paused for the run. A run mostly grows the heap (futures,
    # Outputs and closures that live until it ends), so each collection re-walks more of it; at
    # 512 GPU workers that was over half of the plan's wall time (BENCHMARKS.md). Without it,
    # peak memory grows about 5% (small asyncio cycles wait for the collector); reference
    # counting still frees the rest, and the collector resumes, as it was, when the run ends.
    collecting = gc.isenabled()
    gc.disable()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return contextvars.copy_context().run(
            _run_in_context, program, project, stack, dict(config), secret_keys, preview
        )
    finally:
        try:
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()
            # The SDK makes a new loop when it finds none (`_ensure_event_loop`).
            asyncio.set_event_loop(None)
            if collecting:
                gc.enable()


def _run_in_context(
    program: Callable[[], None],
    project: str,
    stack: str,
    config: dict[str, str],
    secret_keys: list[str],
    preview: bool,
) -> ProgramRun:
    runtime_settings.ROOT.set(None)
    set_all_config(config, secret_keys)
    monitor = RecordingMonitor(_PlanMocks())
    mocks.set_mocks(_PlanMocks(), project=project, stack=stack, preview=preview, monitor=monitor)
    root = runtime_settings.get_root_resource()
    _sync_await(run_pulumi_func(program))
    outputs: dict[str, Any] = {}
    if root is not None:
        outputs = _collect_stack_outputs(root)
    return ProgramRun(resources=monitor.recorded, stack_outputs=outputs)


def _collect_stack_outputs(root: pulumi.Resource) -> dict[str, Any]:
    """Resolve `pulumi.export`ed values, keeping secrets wrapped so callers can redact them.

    Each Output inside a value is awaited where it sits, and a secret one is wrapped there, as the
    engine stores it; lifting a whole value into one Output first (`Output.from_input`) would
    build an `Output.all` per dict and list, a third of a second for the nodes map of 512 GPU
    workers, to reach the same values.
    """
    exported: dict[str, Any] = dict(getattr(root, "outputs", {}) or {})
    return _sync_await(_resolved(exported))


async def _resolved(value: Any) -> Any:
    if isinstance(value, pulumi.Output):
        plain = await _resolved(await value.future())
        return rpc.wrap_rpc_secret(plain) if await value.is_secret() else plain
    if isinstance(value, dict):
        return {key: await _resolved(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [await _resolved(item) for item in value]
    if inspect.isawaitable(value):
        return await _resolved(await value)
    return value


def run_project_main(project_dir: Path) -> Callable[[], None]:
    """A program callable that runs the project's real `__main__.py`, as the CLI would."""
    return run_program_file(project_dir / "__main__.py")


def run_program_file(path: Path, init_globals: dict[str, Any] | None = None) -> Callable[[], None]:
    """A program callable that runs the Python file at `path` as `__main__`, the way Pulumi's
    language host runs a project's program (`runpy.run_path`)."""

    def program() -> None:
        runpy.run_path(str(path), init_globals=init_globals, run_name="__main__")

    return program
