"""The program side of the `gpucluster` provider plugin (`provider/`, loaded from this repository
through Pulumi.yaml's `plugins.providers`): the base of our custom resources and the one explicit
provider resource that carries the vCenter connection.

Type tokens are `gpucluster:<module>:<Name>` and frozen once released: the token is what the state
keys a resource on. Each resource also carries an alias to the token it had as a Python dynamic
resource (`pulumi-python:dynamic/<module>:<Name>`, pulumi/dynamic/dynamic.py `__init_subclass__`),
so an existing stack's resources are found under their old type and moved, not replaced (pulumi
`getOldResource` follows a resource's aliases; docs/deploy.md, "Moving from dynamic providers").

Why an explicit provider resource, not the default provider reading config: a default provider
receives only its own package's config (`gpucluster:*`; pulumi/pulumi
pkg/resource/deploy/target.go), while the vCenter settings live under `vsphere:*`, which
pulumi-vsphere reads too. An explicit provider takes them as inputs from the same keys the program
reads today, the password as a Pulumi secret (encrypted in the state, a secret in `Configure`), so
no stack file changes and no setting is kept twice.

Every resource of ours gets that provider unless its options name one; it is registered once per
program run, on first use.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

import pulumi
from pulumi.runtime import settings as runtime_settings

PACKAGE = "gpucluster"
PROVIDER_RESOURCE_NAME = "gpucluster"
DEFAULT_MAX_CONCURRENT_OPERATIONS = 640
"""The plugin's worker threads for blocking vCenter/Kubernetes calls (docs/architecture.md,
"The gpucluster provider": why 640)."""

_UNCONVERTED_OUTPUT_TYPES = frozenset(f"pulumi.Output[{t}]" for t in ("str", "bool", "list[str]"))


def _needs_no_conversion(annotation: object) -> bool:
    """Output types the SDK would pass through unchanged (annotations are strings here: every
    module of ours has `from __future__ import annotations`)."""
    return annotation in _UNCONVERTED_OUTPUT_TYPES


class GpuclusterProvider(pulumi.ProviderResource):
    """The `gpucluster` provider, configured with the vCenter connection.

    Inputs are the `vsphere:*` stack keys without their namespace; a missing one stays unset here
    and the plugin falls back to the VSPHERE_* environment variables, as pulumi-vsphere does
    (components/vcenter/settings.py).
    """

    def __init__(
        self,
        name: str,
        *,
        vsphere_server: pulumi.Input[str] | None,
        user: pulumi.Input[str] | None,
        password: pulumi.Input[str] | None,
        allow_unverified_ssl: pulumi.Input[str] | None,
        max_concurrent_operations: int = DEFAULT_MAX_CONCURRENT_OPERATIONS,
        vcenter_timeout_seconds: float | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """:param vcenter_timeout_seconds: the wall-clock bound of each vCenter operation, logins
        and retries included (default None: the plugin's 120 s; docs/reruns.md)."""
        props: dict[str, Any] = {
            "vsphereServer": vsphere_server,
            "user": user,
            "password": None if password is None else pulumi.Output.secret(password),
            "allowUnverifiedSsl": allow_unverified_ssl,
            "maxConcurrentOperations": max_concurrent_operations,
        }
        if vcenter_timeout_seconds is not None:  # absent when unset: existing stacks see no change
            props["vcenterTimeoutSeconds"] = vcenter_timeout_seconds
        super().__init__(PACKAGE, name, props, opts)


def provider_from_stack_config() -> GpuclusterProvider:
    """The provider for this program run, from the `vsphere:*` keys (and
    `gpucluster:maxConcurrentOperations`, `gpucluster:vcenterTimeoutSeconds`)."""
    vsphere = pulumi.Config("vsphere")
    own = pulumi.Config(PACKAGE)
    return GpuclusterProvider(
        PROVIDER_RESOURCE_NAME,
        vsphere_server=vsphere.get("vsphereServer"),
        user=vsphere.get("user"),
        password=vsphere.get_secret("password"),
        allow_unverified_ssl=vsphere.get("allowUnverifiedSsl"),
        max_concurrent_operations=own.get_int("maxConcurrentOperations") or DEFAULT_MAX_CONCURRENT_OPERATIONS,
        vcenter_timeout_seconds=own.get_float("vcenterTimeoutSeconds"),
    )


_providers: dict[int, GpuclusterProvider] = {}


def program_provider() -> GpuclusterProvider:
    """The one provider of the current program run (a test may run several programs in one
    process: each run has its own root stack resource, and so its own provider)."""
    key = id(runtime_settings.get_root_resource())
    if key not in _providers:
        _providers.clear()
        _providers[key] = provider_from_stack_config()
    return _providers[key]


class GpuclusterResource(pulumi.CustomResource):
    """A resource served by the `gpucluster` plugin.

    Subclasses declare `module=` and `name=`; their `pulumi.Output[...]` annotations stay for type
    checkers and are dropped from the class at runtime: the SDK re-reads a resource class's
    annotations with `typing.get_type_hints` on every registration (`pulumi._types.resource_types`,
    uncached) to convert outputs, and ours (`str`, `bool`, lists of `str`) need no conversion:
    0.2 s at 512 GPU workers.
    """

    TYPE: ClassVar[str]
    DYNAMIC_TYPE: ClassVar[str]
    """The token this kind had as a Python dynamic resource, kept as an alias."""

    def __init_subclass__(cls, module: str = "", name: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not module or not name:
            raise TypeError(f"{cls.__name__}: declare module= and name= (the type token)")
        cls.TYPE = f"{PACKAGE}:{module}:{name}"
        cls.DYNAMIC_TYPE = f"pulumi-python:dynamic/{module}:{name}"
        for attr, annotation in inspect.get_annotations(cls).items():
            if not _needs_no_conversion(annotation):
                raise TypeError(f"{cls.__name__}.{attr}: output type {annotation!r} would need conversion")
        cls.__annotations__ = {}

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        own = pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=self.DYNAMIC_TYPE)])
        if opts is None or opts.provider is None:
            own.provider = program_provider()
        super().__init__(self.TYPE, name, props, pulumi.ResourceOptions.merge(own, opts))
