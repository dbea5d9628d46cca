"""Host graphics mode: NVIDIA vGPU needs the host's default graphics type "Shared Direct".

pulumi-vsphere cannot set it, so this dynamic provider does, over pyvmomi
(`HostGraphicsManager.UpdateGraphicsConfig`), or, with `manage=False`, only verifies it and
fails early with the fix spelled out. ESXi applies a new default graphics type after Xorg is
restarted or the host reboots; vCenter shows the pending change under
Host > Configure > Hardware > Graphics.
"""

from __future__ import annotations

import logging
from typing import Any

import pulumi
import pulumi.dynamic
from pyVmomi import vim

from components.dynamic_resource import DynamicResource
from components.vcenter.errors import VsphereError
from components.vcenter.lookups import find_host, find_host_or_none
from components.vsphere.provider_base import RetryPolicy, VsphereProvider, is_unknown, public_props

_log = logging.getLogger(__name__)

SHARED_DIRECT = "sharedDirect"
#: vSphere's default assignment policy ("Spread VMs across GPUs (best performance)").
DEFAULT_ASSIGNMENT_POLICY = "performance"
ASSIGNMENT_POLICIES = ("performance", "consolidation")

#: Only one attempt, with a short time budget, for the early check during `pulumi preview`.
CHECK_RETRY = RetryPolicy(attempts=1, max_total=20.0)


def not_shared_direct_message(host_name: str, current: str) -> str:
    return (
        f"host {host_name}: default graphics type is {current!r}, but NVIDIA vGPU needs "
        f"'{SHARED_DIRECT}' (Shared Direct). Fix: set `hostGraphics.manage: true` in the stack "
        "file so this program sets it, or change it in vCenter: Host > Configure > Hardware > "
        "Graphics > Host Graphics > Edit > Shared Direct (then restart Xorg or reboot the host)."
    )


def read_graphics(host: Any) -> tuple[str, str]:
    """(hostDefaultGraphicsType, sharedPassthruAssignmentPolicy) of a host."""
    manager = host.configManager.graphicsManager
    if manager is None:
        raise VsphereError(
            f"host {host.name} has no graphics manager (vSphere 6.5 or later is needed for vGPU)",
            object_name=host.name,
        )
    config = manager.graphicsConfig
    if config is None:
        return "shared", DEFAULT_ASSIGNMENT_POLICY
    return (
        config.hostDefaultGraphicsType or "shared",
        config.sharedPassthruAssignmentPolicy or DEFAULT_ASSIGNMENT_POLICY,
    )


def write_graphics(host: Any, graphics_type: str, policy: str) -> None:
    manager = host.configManager.graphicsManager
    current = manager.graphicsConfig
    manager.UpdateGraphicsConfig(
        config=vim.host.GraphicsConfig(
            hostDefaultGraphicsType=graphics_type,
            sharedPassthruAssignmentPolicy=policy,
            # Per-device overrides are the admin's; send them back unchanged.
            deviceType=list(current.deviceType or []) if current is not None else [],
        )
    )


class HostGraphicsModeProvider(VsphereProvider):
    """Dynamic provider for `HostGraphicsMode`."""

    def __init__(self, *, retry: RetryPolicy | None = None) -> None:
        super().__init__(retry=retry)

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.CheckResult:
        inputs = public_props(news)
        failures: list[pulumi.dynamic.CheckFailure] = []
        host_name = inputs.get("host_name")
        if not is_unknown(host_name):
            if not isinstance(host_name, str) or not host_name.strip():
                failures.append(pulumi.dynamic.CheckFailure("host_name", "must be a host name"))
                host_name = None
            else:
                host_name = inputs["host_name"] = host_name.strip()
        manage = inputs.get("manage")
        if not is_unknown(manage) and not isinstance(manage, bool):
            failures.append(pulumi.dynamic.CheckFailure("manage", "must be true or false"))
        policy = inputs.get("assignment_policy") or DEFAULT_ASSIGNMENT_POLICY
        if not is_unknown(policy):
            if policy not in ASSIGNMENT_POLICIES:
                failures.append(
                    pulumi.dynamic.CheckFailure("assignment_policy", f"must be one of {', '.join(ASSIGNMENT_POLICIES)}")
                )
            inputs["assignment_policy"] = policy
        if manage is False and isinstance(host_name, str) and not failures:
            failure = self._verify_early(host_name)
            if failure is not None:
                failures.append(failure)
        return pulumi.dynamic.CheckResult(inputs, failures)

    def _verify_early(self, host_name: str) -> pulumi.dynamic.CheckFailure | None:
        """Fail `pulumi preview` early when manage=False and the host is not Shared Direct.

        Best effort on purpose: a preview of a brand-new stack may run where vCenter is not
        reachable or no credentials are configured (a reviewer, CI on a fork). Failing check
        there would block every preview; `create`/`update` verify again before anything
        depends on the host, so skipping here loses nothing but the early warning.
        """
        if not self.has_connection_settings:
            return None

        def op(si: Any) -> str | None:
            host = find_host_or_none(si, host_name)
            return None if host is None else read_graphics(host)[0]

        try:
            current = self.run(op, what=f"check graphics of host {host_name}", retry=CHECK_RETRY)
        except VsphereError as exc:
            _log.debug("HostGraphicsMode check skipped for %s: %s", host_name, exc)
            return None
        if current is None:
            return pulumi.dynamic.CheckFailure("host_name", f"host {host_name!r} not found in vCenter")
        if current != SHARED_DIRECT:
            return pulumi.dynamic.CheckFailure("manage", not_shared_direct_message(host_name, current))
        return None

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        # Another host is another object; the old host gets its previous mode back afterwards.
        replaces = ["host_name"] if olds.get("host_name") != news.get("host_name") else []
        changes = (
            bool(replaces)
            or olds.get("manage") != news.get("manage")
            or olds.get("default_graphics_type") != SHARED_DIRECT
            or (bool(news.get("manage")) and olds.get("assignment_policy") != news.get("assignment_policy"))
        )
        return pulumi.dynamic.DiffResult(changes=changes, replaces=replaces, delete_before_replace=False)

    def _apply(self, news: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
        host_name: str = news["host_name"]
        manage = bool(news.get("manage"))
        policy = news.get("assignment_policy") or DEFAULT_ASSIGNMENT_POLICY
        before: dict[str, Any] = dict(previous or {})

        def op(si: Any) -> dict[str, Any]:
            host = find_host(si, host_name)
            current_type, current_policy = read_graphics(host)
            if not before:
                before.update(
                    previous_default_graphics_type=current_type,
                    previous_assignment_policy=current_policy,
                )
            if not manage:
                if current_type != SHARED_DIRECT:
                    raise VsphereError(not_shared_direct_message(host_name, current_type), object_name=host_name)
            elif (current_type, current_policy) != (SHARED_DIRECT, policy):
                write_graphics(host, SHARED_DIRECT, policy)
            actual_type, actual_policy = read_graphics(host)
            return {
                "host_name": host_name,
                "manage": manage,
                "default_graphics_type": actual_type,
                "assignment_policy": actual_policy,
                **before,
            }

        return self.run(op, what=f"graphics mode of host {host_name}")

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        outs = self._apply(props, previous=None)
        return pulumi.dynamic.CreateResult(id_=f"graphics:{props['host_name']}", outs=outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        previous = None
        # Taking over management (manage False -> True) records the host's state at that point.
        if olds.get("manage") or not news.get("manage"):
            previous = {
                "previous_default_graphics_type": olds.get("previous_default_graphics_type"),
                "previous_assignment_policy": olds.get("previous_assignment_policy"),
            }
        return pulumi.dynamic.UpdateResult(outs=self._apply(news, previous=previous))

    def read(self, id_: str, props: dict[str, Any]) -> pulumi.dynamic.ReadResult:
        host_name = props["host_name"]

        def op(si: Any) -> dict[str, Any] | None:
            host = find_host_or_none(si, host_name)
            if host is None:
                return None
            graphics_type, policy = read_graphics(host)
            return {
                **public_props(props),
                "default_graphics_type": graphics_type,
                "assignment_policy": policy,
            }

        outs = self.run(op, what=f"read graphics mode of host {host_name}")
        if outs is None:
            return pulumi.dynamic.ReadResult(id_="", outs={})  # host gone: resource gone
        return pulumi.dynamic.ReadResult(id_=id_, outs=outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        if not props.get("manage"):
            return  # verify-only: nothing was changed
        host_name = props["host_name"]
        previous_type = props.get("previous_default_graphics_type") or "shared"
        previous_policy = props.get("previous_assignment_policy") or DEFAULT_ASSIGNMENT_POLICY

        def op(si: Any) -> None:
            host = find_host_or_none(si, host_name)
            if host is None:
                return
            current = read_graphics(host)
            # Restore only what still is ours; a later change by an admin stays.
            if current == (SHARED_DIRECT, props.get("assignment_policy")) and current != (
                previous_type,
                previous_policy,
            ):
                write_graphics(host, previous_type, previous_policy)

        self.run(op, what=f"restore graphics mode of host {host_name}")


class HostGraphicsMode(DynamicResource, module="vsphere", name="HostGraphicsMode"):
    """Sets (manage=True) or verifies (manage=False) the host default graphics type Shared Direct.

    Type token: `pulumi-python:dynamic/vsphere:HostGraphicsMode`. With manage=False a host not in
    Shared Direct mode fails `pulumi preview` (when vCenter is reachable) and `pulumi up`, with a
    message naming the host and the fix. Delete restores the previous mode when manage=True.
    Switching manage from true to false leaves the host as it is.
    """

    host_name: pulumi.Output[str]
    """The ESXi host's name in vCenter."""
    manage: pulumi.Output[bool]
    """Whether this resource sets the mode (True) or only verifies it (False)."""
    default_graphics_type: pulumi.Output[str]
    """The host default graphics type (live value after a refresh): "shared" or "sharedDirect"."""
    assignment_policy: pulumi.Output[str]
    """Shared passthrough GPU assignment policy: "performance" or "consolidation"."""
    previous_default_graphics_type: pulumi.Output[str]
    """The graphics type before this resource changed it; delete restores it."""
    previous_assignment_policy: pulumi.Output[str]
    """The assignment policy before this resource changed it; delete restores it."""

    def __init__(
        self,
        resource_name: str,
        *,
        host_name: pulumi.Input[str],
        manage: bool,
        assignment_policy: str = DEFAULT_ASSIGNMENT_POLICY,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """
        :param host_name: the ESXi host's name as vCenter shows it.
        :param manage: True: set Shared Direct (and restore on delete). False: only verify.
        :param assignment_policy: shared passthrough assignment policy when managing; default
            "performance", vSphere's own default.
        """
        super().__init__(
            HostGraphicsModeProvider(),
            resource_name,
            {
                "host_name": host_name,
                "manage": manage,
                "assignment_policy": assignment_policy,
                "default_graphics_type": None,
                "previous_default_graphics_type": None,
                "previous_assignment_policy": None,
            },
            opts,
        )
