"""InitPkiDelivery: the stack's side of the init node's key handoff (node_bootstrap/pki_handoff.py).

The first control-plane node's user-data carries no key. Its bootstrap posts a certificate of a
key it made as `guestinfo.gpucluster.pki.request`; `create` polls the VM's extraConfig for it,
seals the PKI bundle to it and writes the envelope as `guestinfo.gpucluster.pki.envelope`, then
waits until the node answers `guestinfo.gpucluster.pki.received` with that certificate's
fingerprint, and removes the request and the envelope from the VM (the answer stays: it is public,
and a re-run that finds it knows the node has its keys).

One request per VM (issue 53 item 1). Anyone who can set the VM's guestinfo can post a
certificate: a vCenter user with VirtualMachine.Config.AdvancedConfig, or any process in the guest,
root or not (open-vm-tools lets every user `info-set`). So the stack seals to the first request it
finds and to no other: a second certificate means either the first or the second was not the
node's, and the keys may be in someone else's hands. `create` then fails, names what to rotate
("keys exposed: rotate ...") and seals nothing to the newcomer; it keeps failing on every re-run
until the VM is replaced (a new VM is a new delivery). The envelope names the certificate it was
sealed to, and stays on the VM until the node answers, so a re-run knows which request was
answered even when the run that answered it was cut. The envelope is signed with the stack's
hand-off key (`signing_key`, ClusterBootstrap's), whose public half the init node's user-data
carries: the node opens no envelope the stack did not write. The clone clears the hand-off keys a
template or an earlier VM left (first_boot.py), so the first request is the new VM's own.

Re-runs and faults: a node that rebooted before opening the envelope keeps its key on disk and
posts the same request, so the envelope written still opens (a re-run seals to it again). A node
that lost its key posts another certificate: that is a second request too, refused as above, since
the stack cannot tell it from someone else's. An interrupted `create` runs again from the top and
finds either the answer (done) or the request and the envelope (seals again to the same
certificate). The wait is `wait_seconds` (the program gives the join's timeout); running out fails
`pulumi up` naming the VM and what to check.

Every value read or written is public, ciphertext or a signature: a refresh or a failed run leaves
no key in vCenter.

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
    HandoffEnvelopeError,
    HandoffRequestError,
    envelope_recipient,
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


def delivered(values: dict[str, str], answered: str) -> bool:
    """Whether the node has said its keys arrived: its answer names `answered`, the certificate
    the keys were sealed to, and the VM holds no other request."""
    received = values.get(RECEIVED_KEY)
    if not received or received != answered:
        return False
    request = values.get(REQUEST_KEY)
    return not request or _fingerprint(request) in (answered, None)


def _fingerprint(request: str) -> str | None:
    try:
        return request_fingerprint(request)
    except HandoffRequestError:
        return None


def earlier_answer(values: dict[str, str]) -> str | None:
    """The certificate an earlier run sealed the keys to: what the envelope still on the VM names
    (a run cut after sealing), or the node's answer once the envelope was removed."""
    envelope = values.get(ENVELOPE_KEY)
    if envelope:
        try:
            return envelope_recipient(envelope)
        except HandoffEnvelopeError:
            return None
    return values.get(RECEIVED_KEY) or None


def exposure_error(label: str, answered: str, other: str) -> VsphereError:
    """The delivery's verdict on a second request: the keys went to one of two certificates, and
    only one of them can be the node's."""
    return VsphereError(
        f"VM {label}: keys exposed: rotate. A second key request ({other}) appeared after the keys were sealed "
        f"to {answered}; the stack answers one request per VM, so one of the two was posted by someone else "
        "(a vCenter user with VirtualMachine.Config.AdvancedConfig on this VM, or a process in its guest), who may "
        "hold the cluster's keys. Nothing was sealed to the second. Rotate every key the init node receives: the "
        "cluster CA, the front-proxy CA, the etcd CA, the service-account key and the Secrets encryption keys "
        "(pulumi up --replace with the URNs of ClusterBootstrap's tls PrivateKey resources *-ca-key, "
        "*-front-proxy-ca-key, *-etcd-ca-key, *-sa-key and its random RandomBytes *-secrets-encryption-*), "
        "and replace this VM; then find who could set its guestinfo",
        object_name=label,
    )


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
        key = inputs.get("signing_key")
        if not is_unknown(key) and (not isinstance(key, str) or "PRIVATE KEY" not in key):
            failures.append(handlers.CheckFailure("signing_key", "must be the PEM of the stack's hand-off signing key"))
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
        sent = False
        ignored: set[str] = set()
        while True:
            values = self._values(vm_id, label)
            if answered is None:
                answered = earlier_answer(values)
            if answered is not None and delivered(values, answered):
                break
            request = values.get(REQUEST_KEY)
            fingerprint = _fingerprint(request) if request else None
            if request and fingerprint is None and request not in ignored:
                ignored.add(request)
                pulumi.log.warn(f"VM {label}: ignoring a key request that is not a certificate to seal to")
            if fingerprint is not None and answered is not None and fingerprint != answered:
                raise exposure_error(label, answered, fingerprint)
            if fingerprint is not None and not sent:
                assert request is not None  # a fingerprint comes from a request
                try:
                    envelope = seal_bundle(bundle, request, str(props["signing_key"]))
                except ValueError as exc:  # the signing key, or a bundle too large for guestinfo
                    raise VsphereError(f"VM {label}: could not seal its keys: {exc}", object_name=label) from exc
                self._send(vm_id, label, envelope)
                pulumi.log.info(f"VM {label}: its keys were sealed to {fingerprint} and delivered")
                answered, sent = fingerprint, True
            if self._wait.clock() >= deadline:
                raise VsphereError(
                    f"VM {label}: its node did not "
                    + ("confirm it received" if sent else "ask for")
                    + f" its keys within {float(props['wait_seconds']) / 60:g} minutes (guestinfo "
                    f"{REQUEST_KEY if not sent else RECEIVED_KEY}). On the node: journalctl -u "
                    "gpucluster-bootstrap (is open-vm-tools running?); then run pulumi up again",
                    object_name=label,
                )
            self._wait.sleep(self._wait.poll_seconds)
        left = self._remove(vm_id, label, (REQUEST_KEY, ENVELOPE_KEY)) or []
        return handlers.CreateResult(id_=f"init-pki-delivery:{vm_id}", outs=self._outs(props, left, answered or ""))

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
        signing_key: pulumi.Input[str],
        wait_seconds: float,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """
        :param vm_id: the init VM's id (`vsphere.VirtualMachine.id`, its BIOS UUID).
        :param vm_name: the VM's name in vCenter (for messages).
        :param node_name: the node the VM becomes.
        :param bundle: base64 of `pki_handoff.pki_bundle` (`ClusterBootstrap.init_pki_bundle`); kept secret.
        :param signing_key: PEM of the stack's ECDSA P-256 hand-off key
            (`ClusterBootstrap.init_pki_signing_key_pem`), whose public half the init node's user-data
            carries; kept secret.
        :param wait_seconds: how long to wait for the node's request and its answer.
        """
        super().__init__(
            resource_name,
            {
                "vm_id": vm_id,
                "vm_name": vm_name,
                "node_name": node_name,
                "bundle": pulumi.Output.secret(bundle),
                "signing_key": pulumi.Output.secret(signing_key),
                "wait_seconds": wait_seconds,
                "certificate_fingerprint": None,
                "keys_present": None,
            },
            opts,
        )
