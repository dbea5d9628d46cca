"""InitPkiDelivery: the stack's side of the init node's key handoff (node_bootstrap/pki_handoff.py).

The first control-plane node's user-data carries no key. Its bootstrap posts a certificate of a
key it made as `guestinfo.gpucluster.pki.request`; `create` polls the VM's extraConfig for it,
seals the PKI bundle to it and writes the envelope as `guestinfo.gpucluster.pki.envelope`, then
waits until the node answers `guestinfo.gpucluster.pki.received` with that certificate's
fingerprint, and removes the request and the envelope from the VM (the answer stays: it is public,
and a re-run that finds it knows the node has its keys).

Re-runs and faults: a node that rebooted before opening the envelope keeps its key on disk and
posts the same request, so the envelope written still opens. A request that changes (a node that
lost its key, or a stale one copied with a template) is answered again: only the latest counts,
and only its fingerprint ends the wait. An interrupted `create` runs again from the top and finds
either the answer (done) or the request (answers it again). The wait is `wait_seconds` (the
program gives the join's timeout); running out fails `pulumi up` naming the VM and what to check.

Why the request is trusted: only the VM's guest and whoever may write its extraConfig can set it,
and both already control the node (pki_handoff.py). Every value read or written is public or
ciphertext: a refresh or a failed run leaves no key in vCenter.

The handoff keys are no drift for the VM resource: terraform-provider-vsphere reads back only the
extraConfig keys its configuration names (virtual_machine_config_structure.go, `flattenExtraConfig`).

`read` reports whether the VM still holds any of the handoff keys; the VM gone, the resource is
gone. `delete` removes what is left of them. A new VM (a replaced init node) is a new delivery.

Existing clusters: the init VM of a cluster made by an earlier version got its keys in user-data
and never asks. Its first-boot metadata lacks the marker `first_boot` puts in every VM's metadata
now (and the VM ignores changes to that key), so `create` finishes at once for it.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.vcenter.errors import VsphereError
from components.vcenter.lookups import find_vm_by_uuid, require_vm_by_uuid
from components.vsphere.first_boot import asks_for_its_keys
from components.vsphere.guestinfo_scrub import remove_keys, set_extra_config
from components.vsphere.key_handoff import (
    ENVELOPE_KEY,
    HANDOFF_KEYS,
    RECEIVED_KEY,
    REQUEST_KEY,
    HandoffRequestError,
    request_fingerprint,
    seal_bundle,
)
from components.vsphere.provider_base import RetryPolicy, VsphereProvider, check_vm_id, is_unknown, public_props

SETINFO_DISABLE = "isolation.tools.setinfo.disable"
"""A VM setting of VMware's hardening guidance ("prevent guests from writing name-value pairs to
the configuration file"); VMX keys are case-insensitive, so it is compared in lower case."""


@dataclass(frozen=True)
class DeliveryWait:
    """How `create` polls the VM (tests pass their own clock)."""

    poll_seconds: float = 5.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def handoff_values(vm: Any) -> dict[str, str]:
    """The handoff keys the VM's extraConfig holds, by key."""
    return {str(o.key): str(o.value) for o in vm.config.extraConfig or [] if o.key in HANDOFF_KEYS}


def delivered(values: dict[str, str]) -> bool:
    """Whether the node has said its keys arrived: its answer names the certificate of the request
    the VM holds, or the request is gone (removed after an answer by an earlier run)."""
    received = values.get(RECEIVED_KEY)
    if not received:
        return False
    request = values.get(REQUEST_KEY)
    if not request:
        return True
    try:
        return received == request_fingerprint(request)
    except HandoffRequestError:
        return False


def write_envelope(vm: Any, envelope: str) -> None:
    """Set the envelope on the (running) VM: the guest reads it with `info-get`."""
    set_extra_config(vm, {ENVELOPE_KEY: envelope}, what="writing the init node's sealed keys to guestinfo")


class InitPkiDeliveryProvider(VsphereProvider):
    """Dynamic provider for `InitPkiDelivery`."""

    def __init__(self, *, retry: RetryPolicy | None = None, wait: DeliveryWait | None = None) -> None:
        super().__init__(retry=retry)
        self._wait = wait or DeliveryWait()

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.CheckResult:
        inputs = public_props(news)
        failures = check_vm_id(inputs)
        bundle = inputs.get("bundle")
        if not is_unknown(bundle):
            try:
                base64.b64decode(str(bundle), validate=True)
            except ValueError:
                failures.append(handlers.CheckFailure("bundle", "must be the base64 of pki_handoff.pki_bundle"))
        wait_seconds = inputs.get("wait_seconds")
        if not is_unknown(wait_seconds) and (
            isinstance(wait_seconds, bool) or not isinstance(wait_seconds, int | float) or wait_seconds <= 0
        ):
            failures.append(handlers.CheckFailure("wait_seconds", "must be a number of seconds above 0"))
        return handlers.CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        # A new VM is a new delivery. New keys for a node that has its own are nothing to do:
        # the cluster's settings move through kubeadm-config and rollouts, not through this.
        replaces = ["vm_id"] if olds.get("vm_id") != news.get("vm_id") else []
        return handlers.DiffResult(changes=bool(replaces), replaces=replaces)

    @staticmethod
    def _outs(props: dict[str, Any], keys_present: list[str], fingerprint: str) -> dict[str, Any]:
        return {
            "vm_id": props["vm_id"],
            "vm_name": props.get("vm_name") or "",
            "node_name": props.get("node_name") or "",
            "wait_seconds": props.get("wait_seconds"),
            "certificate_fingerprint": fingerprint,
            "keys_present": keys_present,
        }

    def _values(self, vm_id: str, label: str) -> dict[str, str]:
        def op(si: Any) -> dict[str, str]:
            vm = require_vm_by_uuid(si, vm_id, label)
            return handoff_values(vm)

        return self.run(op, what=f"read the key request of VM {label}")

    def _send(self, vm_id: str, label: str, envelope: str) -> None:
        def op(si: Any) -> None:
            vm = require_vm_by_uuid(si, vm_id, label)
            write_envelope(vm, envelope)

        self.run(op, what=f"deliver the sealed keys to VM {label}")

    def _remove(self, vm_id: str, label: str, keys: tuple[str, ...]) -> list[str] | None:
        """Remove `keys` from the VM; what is left of the handoff keys, or None for a VM gone."""

        def op(si: Any) -> list[str] | None:
            vm = find_vm_by_uuid(si, vm_id)
            if vm is None:
                return None
            present = [key for key in keys if key in handoff_values(vm)]
            if present:
                remove_keys(vm, present)
            return sorted(handoff_values(vm))

        return self.run(op, what=f"remove the key handoff from VM {label}")

    def _first_look(self, vm_id: str, label: str) -> tuple[bool, bool]:
        """(whether the VM was made before this delivery existed: its metadata lacks the marker
        (first_boot), it got its keys in its user-data long ago and will never ask; whether the
        VM forbids its guest to set guestinfo, so the request could never come)."""

        def op(si: Any) -> tuple[bool, bool]:
            vm = require_vm_by_uuid(si, vm_id, label)
            options = {str(o.key).lower(): str(o.value) for o in vm.config.extraConfig or []}
            forbidden = options.get(SETINFO_DISABLE, "").strip().lower() == "true"
            return not asks_for_its_keys(options.get("guestinfo.metadata")), forbidden

        return self.run(op, what=f"read the first-boot metadata of VM {label}")

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        vm_id: str = props["vm_id"]
        label = props.get("vm_name") or vm_id
        predates, forbidden = self._first_look(vm_id, label)
        if forbidden and not predates:
            raise VsphereError(
                f"VM {label} has {SETINFO_DISABLE} = TRUE, so its node cannot ask for its keys through guestinfo. "
                "Remove that setting from the template the control-plane VMs are cloned from (vCenter: the template's "
                "Edit Settings > Advanced Parameters), or from this VM, then run pulumi up again",
                object_name=label,
            )
        if predates:
            pulumi.log.info(
                f"VM {label} was made before its keys were delivered sealed (its first boot read them from "
                "user-data): nothing to deliver. Replacing it (a rollout) gives it the sealed delivery"
            )
            return handlers.CreateResult(id_=f"init-pki-delivery:{vm_id}", outs=self._outs(props, [], ""))
        bundle = base64.b64decode(props["bundle"])
        deadline = self._wait.clock() + float(props["wait_seconds"])
        answered: str | None = None
        while True:
            values = self._values(vm_id, label)
            if delivered(values):
                break
            request = values.get(REQUEST_KEY)
            if request and request != answered:
                try:
                    envelope = seal_bundle(bundle, request)
                except HandoffRequestError as exc:
                    pulumi.log.warn(f"VM {label}: ignoring its key request: {exc}")
                else:
                    self._send(vm_id, label, envelope)
                    pulumi.log.info(f"VM {label}: its keys were sealed to {request_fingerprint(request)} and delivered")
                answered = request
            if self._wait.clock() >= deadline:
                raise VsphereError(
                    f"VM {label}: its node did not "
                    + ("confirm it received" if answered else "ask for")
                    + f" its keys within {float(props['wait_seconds']) / 60:g} minutes (guestinfo "
                    f"{REQUEST_KEY if not answered else RECEIVED_KEY}). On the node: journalctl -u "
                    "gpucluster-bootstrap (is open-vm-tools running?); then run pulumi up again",
                    object_name=label,
                )
            self._wait.sleep(self._wait.poll_seconds)
        fingerprint = values.get(RECEIVED_KEY, "")
        left = self._remove(vm_id, label, (REQUEST_KEY, ENVELOPE_KEY)) or []
        return handlers.CreateResult(id_=f"init-pki-delivery:{vm_id}", outs=self._outs(props, left, fingerprint))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        # Only inputs that change nothing on the VM reach here (diff replaces for a new VM).
        return handlers.UpdateResult(
            outs=self._outs(news, list(olds.get("keys_present") or []), str(olds.get("certificate_fingerprint") or ""))
        )

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        vm_id = str(props["vm_id"])

        def op(si: Any) -> list[str] | None:
            vm = find_vm_by_uuid(si, vm_id)
            return None if vm is None else sorted(handoff_values(vm))

        present = self.run(op, what=f"read extraConfig of VM {props.get('vm_name') or vm_id}")
        if present is None:
            return handlers.ReadResult(id_="", outs={})
        return handlers.ReadResult(
            id_=id_, outs=self._outs(props, present, str(props.get("certificate_fingerprint") or ""))
        )

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        vm_id = str(props["vm_id"])
        self._remove(vm_id, str(props.get("vm_name") or vm_id), HANDOFF_KEYS)


class InitPkiDelivery(GpuclusterResource, module="vsphere", name="InitPkiDelivery"):
    """Delivers the init node's keys sealed to a key that node made (module docstring).

    Type token: `gpucluster:vsphere:InitPkiDelivery`. vCenter credentials come from the
    gpucluster provider's configuration, never from inputs.
    """

    vm_id: pulumi.Output[str]
    """The init VM's BIOS UUID."""
    certificate_fingerprint: pulumi.Output[str]
    """`sha256:<hex>` of the certificate the keys were sealed to (public)."""
    keys_present: pulumi.Output[list[str]]
    """Handoff keys the VM still holds (the node's answer, once delivered)."""

    def __init__(
        self,
        resource_name: str,
        *,
        vm_id: pulumi.Input[str],
        vm_name: str,
        node_name: str,
        bundle: pulumi.Input[str],
        wait_seconds: float,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """
        :param vm_id: the init VM's id (`vsphere.VirtualMachine.id`, its BIOS UUID).
        :param vm_name: the VM's name in vCenter (for messages).
        :param node_name: the node the VM becomes.
        :param bundle: base64 of `pki_handoff.pki_bundle` (`ClusterBootstrap.init_pki_bundle`); kept secret.
        :param wait_seconds: how long to wait for the node's request and its answer.
        """
        super().__init__(
            resource_name,
            {
                "vm_id": vm_id,
                "vm_name": vm_name,
                "node_name": node_name,
                "bundle": pulumi.Output.secret(bundle),
                "wait_seconds": wait_seconds,
                "certificate_fingerprint": None,
                "keys_present": None,
            },
            opts,
        )
