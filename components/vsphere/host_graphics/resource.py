"""Host graphics mode: NVIDIA vGPU needs the host's GPU running in "Shared Direct" mode.

pulumi-vsphere cannot set it, so this dynamic provider does, over pyvmomi, or, with
`manage=False`, only verifies it and fails early with the fix spelled out. Setting it takes two
steps on ESXi (see `host_graphics_ops`): `HostGraphicsManager.UpdateGraphicsConfig` changes the
configured default graphics type, and a restart of the host's `xorg` service
(`HostServiceSystem.RestartService`) makes it active, provided no running VM holds the GPU. We do
both (the restart only when no running VM holds the GPU: otherwise we fail before it), and report and wait for the *active* type of the NVIDIA device(s), which is what a vGPU VM's
power-on needs: a configured but inactive Shared Direct fails here, naming the VMs to power off.
"""

from __future__ import annotations

import logging
from typing import Any

import pulumi

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.vcenter.errors import VsphereError
from components.vcenter.lookups import find_host, find_host_or_none
from components.vsphere.host_graphics.ops import (
    ACTIVE_POLL_S,
    ACTIVE_TIMEOUT_S,
    ASSIGNMENT_POLICIES,
    DEFAULT_ASSIGNMENT_POLICY,
    SHARED_DIRECT,
    GraphicsState,
    not_active_message,
    override_message,
    read_current_state,
    read_previous,
    restart_xorg,
    wait_until_active,
    write_config,
    write_previous,
)
from components.vsphere.provider_base import RetryPolicy, VsphereProvider, is_unknown, public_props
from components.vsphere.step_loop_reads import NotRead, read_on_step_loop

_log = logging.getLogger(__name__)

__all__ = [
    "ASSIGNMENT_POLICIES",
    "DEFAULT_ASSIGNMENT_POLICY",
    "SHARED_DIRECT",
    "HostGraphicsMode",
    "HostGraphicsModeProvider",
    "not_shared_direct_message",
]


def not_shared_direct_message(host_name: str, current: str) -> str:
    return (
        f"host {host_name}: the NVIDIA GPU runs in {current!r} graphics mode, but NVIDIA vGPU needs "
        f"'{SHARED_DIRECT}' (Shared Direct). Fix: set `hostGraphics.manage: true` in the stack "
        "file so this program sets it, or change it in vCenter: Host > Configure > Hardware > "
        "Graphics > Host Graphics > Edit > Shared Direct, then restart Xorg with the GPU's VMs "
        "powered off (or reboot the host)."
    )


def verify_message(host_name: str, state: GraphicsState) -> str:
    """manage=False and the GPU is not active in Shared Direct: say which step is missing."""
    if state.overrides:
        return override_message(host_name, state)
    if state.configured_type == SHARED_DIRECT:
        return not_active_message(host_name, state, None)
    return not_shared_direct_message(host_name, state.active_type)


def _outputs(host_name: str, manage: bool, state: GraphicsState, before: dict[str, Any]) -> dict[str, Any]:
    return {
        "host_name": host_name,
        "manage": manage,
        "default_graphics_type": state.configured_type,
        "active_graphics_type": state.active_type,
        "assignment_policy": state.policy,
        **before,
    }


class HostGraphicsModeProvider(VsphereProvider):
    """Dynamic provider for `HostGraphicsMode`."""

    def __init__(
        self,
        *,
        retry: RetryPolicy | None = None,
        active_timeout: float = ACTIVE_TIMEOUT_S,
        active_poll: float = ACTIVE_POLL_S,
    ) -> None:
        """
        :param active_timeout: how long after the Xorg restart the GPU may take to show Shared
            Direct (default 30 s).
        :param active_poll: seconds between looks at it meanwhile (default 3 s).
        """
        super().__init__(retry=retry)
        self.active_timeout = active_timeout
        self.active_poll = active_poll

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.CheckResult:
        inputs = public_props(news)
        failures: list[handlers.CheckFailure] = []
        host_name = inputs.get("host_name")
        if not is_unknown(host_name):
            if not isinstance(host_name, str) or not host_name.strip():
                failures.append(handlers.CheckFailure("host_name", "must be a host name"))
                host_name = None
            else:
                host_name = inputs["host_name"] = host_name.strip()
        manage = inputs.get("manage")
        if not is_unknown(manage) and not isinstance(manage, bool):
            failures.append(handlers.CheckFailure("manage", "must be true or false"))
        policy = inputs.get("assignment_policy") or DEFAULT_ASSIGNMENT_POLICY
        if not is_unknown(policy):
            if policy not in ASSIGNMENT_POLICIES:
                failures.append(
                    handlers.CheckFailure("assignment_policy", f"must be one of {', '.join(ASSIGNMENT_POLICIES)}")
                )
            inputs["assignment_policy"] = policy
        if manage is False and isinstance(host_name, str) and not failures:
            failure = self._verify_early(host_name)
            if failure is not None:
                failures.append(failure)
        return handlers.CheckResult(inputs, failures)

    def _verify_early(self, host_name: str) -> handlers.CheckFailure | None:
        """Fail `pulumi preview` early when manage=False and the host is not Shared Direct.

        Best effort on purpose: a preview of a brand-new stack may run where vCenter is not
        reachable or no credentials are configured (a reviewer, CI on a fork). Failing check
        there would block every preview; `create`/`update` verify again before anything
        depends on the host, so skipping here loses nothing but the early warning.
        """
        if not self.has_connection_settings:
            return None

        def op(si: Any) -> GraphicsState | None:
            host = find_host_or_none(si, host_name)
            return None if host is None else read_current_state(host)

        # On the engine's step loop: a bounded read, skipped past its budget (step_loop_reads.py).
        state = read_on_step_loop(self, op, what=f"check graphics of host {host_name}")
        if isinstance(state, NotRead):
            _log.debug("HostGraphicsMode check skipped for %s: %s", host_name, state.why)
            return None
        if state is None:
            return handlers.CheckFailure("host_name", f"host {host_name!r} not found in vCenter")
        if state.active_type != SHARED_DIRECT:
            return handlers.CheckFailure("manage", verify_message(host_name, state))
        return None

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        # Another host is another object; the old host gets its previous mode back afterwards.
        replaces = ["host_name"] if olds.get("host_name") != news.get("host_name") else []
        managed = bool(news.get("manage"))
        changes = (
            bool(replaces)
            or olds.get("manage") != news.get("manage")
            # The active mode is what vGPU VMs need; state from before it was recorded has none.
            or olds.get("active_graphics_type") != SHARED_DIRECT
            or (managed and olds.get("default_graphics_type") != SHARED_DIRECT)
            or (managed and olds.get("assignment_policy") != news.get("assignment_policy"))
        )
        return handlers.DiffResult(changes=changes, replaces=replaces, delete_before_replace=False)

    def _apply(self, news: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
        host_name: str = news["host_name"]
        manage = bool(news.get("manage"))
        policy = news.get("assignment_policy") or DEFAULT_ASSIGNMENT_POLICY
        # The first state seen, kept across retries of `op`: a retry after a dropped connection
        # must not take our own half-applied change for what was there before.
        before: dict[str, Any] = dict(previous or {})

        def op(si: Any) -> dict[str, Any]:
            host = find_host(si, host_name)
            state = read_current_state(host)
            if not manage:
                if state.active_type != SHARED_DIRECT:
                    raise VsphereError(verify_message(host_name, state), object_name=host_name)
                before.setdefault("previous_default_graphics_type", state.configured_type)
                before.setdefault("previous_assignment_policy", state.policy)
                return _outputs(host_name, manage, state, before)
            if not before:
                # A record on the host from an earlier create of ours wins over what is
                # configured now, which may be our own Shared Direct (state lost since).
                recorded = read_previous(si, host) or (state.configured_type, state.policy)
                before.update(previous_default_graphics_type=recorded[0], previous_assignment_policy=recorded[1])
            if state.overrides:
                # No default we could set would reach the overridden device: change nothing.
                raise VsphereError(override_message(host_name, state), object_name=host_name)
            if (state.configured_type, state.policy) != (SHARED_DIRECT, policy):
                # Written on the host before the change, so a lost state cannot lose it.
                write_previous(
                    si, host, (before["previous_default_graphics_type"], before["previous_assignment_policy"])
                )
                write_config(host, SHARED_DIRECT, policy)
            restart_error = None
            if state.active_type != SHARED_DIRECT:
                if state.gpu_vms:
                    # VMware's procedure restarts Xorg only with the GPU's VMs powered off
                    # (vSphere Resource Management, "Configuring Host Graphics": "Virtual machines
                    # should be powered off"); restarting the X server under running vSGA VMs
                    # pulls their 3D rendering away, and the GPU would keep its mode anyway. So
                    # no restart: the configured Shared Direct waits, and the error names the VMs.
                    raise VsphereError(not_active_message(host_name, state, None), object_name=host_name)
                restart_error = restart_xorg(host)
            state = wait_until_active(
                host, restart_error=restart_error, timeout=self.active_timeout, interval=self.active_poll
            )
            return _outputs(host_name, manage, state, before)

        return self.run(op, what=f"graphics mode of host {host_name}")

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        outs = self._apply(props, previous=None)
        return handlers.CreateResult(id_=f"graphics:{props['host_name']}", outs=outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        previous = None
        # Taking over management (manage False -> True) records the host's state at that point.
        if olds.get("manage") or not news.get("manage"):
            previous = {
                "previous_default_graphics_type": olds.get("previous_default_graphics_type"),
                "previous_assignment_policy": olds.get("previous_assignment_policy"),
            }
        return handlers.UpdateResult(outs=self._apply(news, previous=previous))

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        host_name = props["host_name"]

        def op(si: Any) -> dict[str, Any] | None:
            host = find_host_or_none(si, host_name)
            if host is None:
                return None
            state = read_current_state(host)
            return {
                **public_props(props),
                "default_graphics_type": state.configured_type,
                "active_graphics_type": state.active_type,
                "assignment_policy": state.policy,
            }

        outs = self.run(op, what=f"read graphics mode of host {host_name}")
        if outs is None:
            return handlers.ReadResult(id_="", outs={})  # host gone: resource gone
        return handlers.ReadResult(id_=id_, outs=outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        if not props.get("manage"):
            return  # verify-only: nothing was changed
        host_name = props["host_name"]

        def op(si: Any) -> None:
            host = find_host_or_none(si, host_name)
            if host is None:
                return
            recorded = read_previous(si, host)
            previous = recorded or (
                props.get("previous_default_graphics_type") or "shared",
                props.get("previous_assignment_policy") or DEFAULT_ASSIGNMENT_POLICY,
            )
            state = read_current_state(host)
            current = (state.configured_type, state.policy)
            # Restore only what still is ours; a later change by an admin stays.
            if current == (SHARED_DIRECT, props.get("assignment_policy")) and current != previous:
                write_config(host, *previous)
                # Best effort: with GPU VMs still running the old mode waits for the next
                # Xorg restart or reboot, which is the admin's to plan; Xorg is not restarted
                # under them (VMware's procedure powers them off first, see `_apply`).
                error = "GPU in use by " + ", ".join(state.gpu_vms) if state.gpu_vms else restart_xorg(host)
                if error or read_current_state(host).active_type != previous[0]:
                    _log.warning(
                        "host %s: graphics type %s configured again, active after the next Xorg restart (%s)",
                        host_name,
                        previous[0],
                        error or "GPU in use",
                    )
            write_previous(si, host, None)

        self.run(op, what=f"restore graphics mode of host {host_name}")


class HostGraphicsMode(GpuclusterResource, module="vsphere", name="HostGraphicsMode"):
    """Sets (manage=True) or verifies (manage=False) the host default graphics type Shared Direct.

    Type token: `gpucluster:vsphere:HostGraphicsMode`. With manage=True it configures
    Shared Direct, restarts the host's `xorg` service when the GPU does not run in it yet, and
    succeeds only once the NVIDIA GPU's *active* type is Shared Direct; running VMs that hold the
    GPU prevent the switch and are named in the error (power them off, run again). With
    manage=False a host whose GPU does not run in Shared Direct fails `pulumi preview` (when
    vCenter is reachable) and `pulumi up`, with a message naming the host and the fix. Delete
    restores the previous mode when manage=True (recorded on the host, so a lost state does not
    lose it). Switching manage from true to false leaves the host as it is.
    """

    host_name: pulumi.Output[str]
    """The ESXi host's name in vCenter."""
    manage: pulumi.Output[bool]
    """Whether this resource sets the mode (True) or only verifies it (False)."""
    default_graphics_type: pulumi.Output[str]
    """The configured host default graphics type (live after a refresh): "shared" or
    "sharedDirect". It takes effect only when Xorg restarts; see `active_graphics_type`."""
    active_graphics_type: pulumi.Output[str]
    """The mode the host's NVIDIA GPU runs in now (`graphicsInfo[].graphicsType`, live after a
    refresh): "sharedDirect" once the change is in effect. vGPU VMs power on only then."""
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
        :param manage: True: set Shared Direct and restart Xorg (needs the GPU's VMs off; restore
            on delete). False: only verify, for hosts an admin manages by hand.
        :param assignment_policy: shared passthrough assignment policy when managing; default
            "performance", vSphere's own default.
        """
        super().__init__(
            resource_name,
            {
                "host_name": host_name,
                "manage": manage,
                "assignment_policy": assignment_policy,
                "default_graphics_type": None,
                "active_graphics_type": None,
                "previous_default_graphics_type": None,
                "previous_assignment_policy": None,
            },
            opts,
        )
