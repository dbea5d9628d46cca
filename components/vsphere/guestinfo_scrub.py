"""GuestinfoScrub: once a node's guest has read its first-boot user-data, remove it from the VM's
extraConfig; and if the guest never does, remove it when the wait runs out.

Why: every node's user-data carries a join token (a joining control-plane node's a certificate
key too; no node's a private key: `components.k8s.node_bootstrap.user_data`). It reaches the
guest as `guestinfo.userdata` in the VM's extraConfig (`first_boot`), which anyone with read
access to the VM in vCenter (any role with System.Read on it: `config.extraConfig` is an ordinary
VM property), to its datastore (the `.vmx` file) or to its backups can read. cloud-init's `redact` does not close that: it overwrites the key
from inside the guest through VMware Tools (`vmware-rpctool "info-set guestinfo.userdata ---"`,
cloudinit/sources/DataSourceVMware.py, `guestinfo_redact_keys`), a guest-side variable that
reaches the `.vmx` file only when the VM is next power-cycled (open-vm-tools issue 288), and a VM
whose cloud-init never ran keeps the original forever.
pulumi-vsphere never blanks it either: the VM ignores changes to these keys (`node_pool`).
Cluster API's vSphere provider leaves it in place (kubernetes-sigs/cluster-api-provider-vsphere
issue 582, open).

When (issue 40 item 6): as soon as the guest has consumed the user-data, not after the node
joined. A node that stops before joining (an RDMA or toolkit refusal in the bootstrap, a failed
kubeadm, an interrupted `pulumi up`) would otherwise keep its keys in vCenter indefinitely. The
sign that the guest has read it is the hostname VMware Tools reports (`guest.hostName`): the
user-data and metadata both set it to the node's name, and cloud-init sets it only after its
VMware datasource read (and redacted) the user-data (DataSourceVMware `_get_data` reads metadata,
user-data and vendor-data together, then `guestinfo_redact_keys`; the `set_hostname` module runs
after it, and after `write_files`, in cloud-init's default module order). The template's own
hostname must therefore not be a node's name. `create` polls for it for `wait_seconds` (the
program gives the join's timeout), then removes `guestinfo.userdata` and
`guestinfo.userdata.encoding` from the VM's extraConfig with `ReconfigVM_Task` (an OptionValue
with an empty value removes the key: vSphere API reference, VirtualMachineConfigSpec.extraConfig,
"Keys with empty values will be removed"; pyvmomi docs/vim/vm/ConfigSpec.rst) and reads the VM
back: a key still there fails the step, naming it. When the wait runs out it removes them anyway
and warns: a guest that had not read them by then can no longer bootstrap, and its VM must be
replaced (`pulumi up --replace` on it); its `NodeJoined` fails `pulumi up` naming the node.
`read` reports the keys present live (`secret_keys_present`), so a refresh sees them come back and
the next `up` removes them again (no wait: the guest read them long ago). A replaced VM has a new
id, so it gets a new scrub.

Why removing them then is safe for the node: cloud-init reads user-data once per instance
(`write_files` and `runcmd` are per-instance modules) and keeps what it read in its instance
cache; on later boots its datasource finds the VM by the metadata keys, which stay: they carry no
secret (hostname, static network, instance-id) and without them a later boot would find no
datasource (`_get_data`: "if md or ud or vd"), fall back to DataSourceNone with another
instance-id and re-run every per-instance module on a running node.

Who can still read them, and when: docs/bootstrap.md, "Secrets in guestinfo".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
from pyVmomi import vim

from components import resource_handlers as handlers
from components.gpucluster_resource import GpuclusterResource
from components.vcenter.errors import VsphereError
from components.vcenter.lookups import find_vm_by_uuid, require_vm_by_uuid
from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy, VsphereProvider, check_vm_id, is_unknown, public_props

SECRET_GUESTINFO_KEYS = ("guestinfo.userdata", "guestinfo.userdata.encoding")
"""The extraConfig keys that carry (or describe) the user-data; `first_boot.GUESTINFO_KEYS` has
them beside the metadata keys, which stay."""
RECONFIGURE_TIMEOUT_SECONDS = 300.0
NOT_FOUND = object()
"""What `_reported_host_name` returns for a VM that is gone."""


@dataclass(frozen=True)
class GuestWait:
    """How the scrub polls for the guest's hostname (tests pass their own clock)."""

    poll_seconds: float = 10.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def guest_has_read_user_data(reported_host_name: str | None, host_name: str) -> bool:
    """Whether VMware Tools reports the node's own hostname (short or fully qualified): cloud-init
    has then read the user-data (see the module docstring)."""
    if not reported_host_name or not host_name:
        return False
    return reported_host_name.split(".")[0].lower() == host_name.split(".")[0].lower()


# ---------------------------------------------------------------------------------------------
# The vCenter side (pyvmomi, on one VM)


def secret_keys_present(vm: Any) -> list[str]:
    """Which of `SECRET_GUESTINFO_KEYS` the VM's extraConfig holds, whatever their value (a
    redacted "---" still counts: only an absent key is scrubbed)."""
    present = {option.key for option in vm.config.extraConfig or []}
    return [key for key in SECRET_GUESTINFO_KEYS if key in present]


def set_extra_config(vm: Any, values: dict[str, str], *, what: str) -> None:
    """Set extraConfig keys of a VM, an empty value removing its key (VirtualMachineConfigSpec.
    extraConfig). Needs VirtualMachine.Config.AdvancedConfig on the VM; a powered-on VM takes it
    (no restart), and its guest reads a `guestinfo.*` key so set with `info-get`."""
    spec = vim.vm.ConfigSpec(extraConfig=[vim.option.OptionValue(key=key, value=value) for key, value in values.items()])
    wait_for_task(vm.ReconfigVM_Task(spec=spec), timeout=RECONFIGURE_TIMEOUT_SECONDS, object_name=vm.name, what=what)


def remove_keys(vm: Any, keys: list[str]) -> None:
    """Remove extraConfig keys: each sent with an empty value."""
    set_extra_config(vm, dict.fromkeys(keys, ""), what="removing first-boot secrets from extraConfig")


# ---------------------------------------------------------------------------------------------
# Provider


class GuestinfoScrubProvider(VsphereProvider):
    """Dynamic provider for `GuestinfoScrub`."""

    def __init__(self, *, retry: RetryPolicy | None = None, wait: GuestWait | None = None) -> None:
        super().__init__(retry=retry)
        self._wait = wait or GuestWait()

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.CheckResult:
        inputs = public_props(news)
        failures = check_vm_id(inputs)
        wait_seconds = inputs.get("wait_seconds")
        known = wait_seconds is not None and not is_unknown(wait_seconds)
        if known and (isinstance(wait_seconds, bool) or not isinstance(wait_seconds, int | float) or wait_seconds < 0):
            failures.append(handlers.CheckFailure("wait_seconds", "must be a number of seconds, 0 or more"))
        return handlers.CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> handlers.DiffResult:
        # A new VM (a replacement) is a new scrub, created after the new VM's node joined.
        replaces = ["vm_id"] if olds.get("vm_id") != news.get("vm_id") else []
        # Drift: a key came back (put there by hand, or by another tool's VM update).
        drift = bool(olds.get("keys_present"))
        changed = any(olds.get(key) != news.get(key) for key in ("vm_name", "node_name"))
        return handlers.DiffResult(changes=bool(replaces) or drift or changed, replaces=replaces)

    @staticmethod
    def _outs(props: dict[str, Any], keys_present: list[str]) -> dict[str, Any]:
        return {
            "vm_id": props["vm_id"],
            "vm_name": props.get("vm_name") or "",
            "node_name": props.get("node_name") or "",
            "keys_present": keys_present,
        }

    def _wait_for_guest(self, props: dict[str, Any]) -> bool:
        """Poll until the guest reports its node's hostname: True, or False when `wait_seconds`
        ran out first. A VM that is gone fails, naming it."""
        vm_id: str = props["vm_id"]
        label = props.get("vm_name") or vm_id
        host_name = str(props.get("host_name") or props.get("node_name") or "")
        deadline = self._wait.clock() + float(props.get("wait_seconds") or 0)

        def op(si: Any) -> object:
            vm = find_vm_by_uuid(si, vm_id)
            if vm is None:
                return NOT_FOUND
            return getattr(vm.guest, "hostName", None) if vm.guest is not None else None

        while True:
            reported = self.run(op, what=f"read the guest hostname of VM {label}")
            if reported is NOT_FOUND:
                raise VsphereError(f"VM {label} (BIOS UUID {vm_id}) not found in vCenter", object_name=label)
            if guest_has_read_user_data(reported if isinstance(reported, str) else None, host_name):
                return True
            if self._wait.clock() >= deadline:
                return False
            self._wait.sleep(self._wait.poll_seconds)

    def _scrub(self, props: dict[str, Any]) -> dict[str, Any]:
        """Remove the keys the VM holds, then read it back: outputs with none left, or an error."""
        vm_id: str = props["vm_id"]
        label = props.get("vm_name") or vm_id

        def op(si: Any) -> list[str]:
            vm = require_vm_by_uuid(si, vm_id, label)
            present = secret_keys_present(vm)
            if present:
                remove_keys(vm, present)
            left = secret_keys_present(vm)
            if left:
                raise VsphereError(
                    f"VM {label}: extraConfig still holds {', '.join(left)} after removing it; the node's "
                    "first-boot secrets are readable in vCenter",
                    object_name=label,
                )
            return left

        return self._outs(props, self.run(op, what=f"remove first-boot secrets from VM {label}"))

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        read_by_guest = self._wait_for_guest(props)
        outs = self._scrub(props)
        label = outs["vm_name"] or outs["vm_id"]
        if read_by_guest:
            pulumi.log.info(f"VM {label}: first-boot secrets removed from extraConfig")
        else:
            pulumi.log.warn(
                f"VM {label}: its guest did not report hostname {props.get('host_name') or props.get('node_name')!r} "
                f"within {float(props.get('wait_seconds') or 0) / 60:g} minutes; its first-boot secrets were removed "
                "from extraConfig anyway. If the node has not bootstrapped it never will: replace the VM "
                "(pulumi up --replace <its URN>)"
            )
        return handlers.CreateResult(id_=f"guestinfo-scrub:{props['vm_id']}", outs=outs)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> handlers.UpdateResult:
        # The node joined before this scrub was created: keys seen again are removed at once.
        return handlers.UpdateResult(outs=self._scrub(news))

    def read(self, id_: str, props: dict[str, Any]) -> handlers.ReadResult:
        vm_id = str(props["vm_id"])

        def op(si: Any) -> list[str] | None:
            vm = find_vm_by_uuid(si, vm_id)
            return None if vm is None else secret_keys_present(vm)

        present = self.run(op, what=f"read extraConfig of VM {props.get('vm_name') or vm_id}")
        if present is None:
            return handlers.ReadResult(id_="", outs={})  # the VM is gone, and its keys with it
        return handlers.ReadResult(id_=id_, outs=self._outs(props, present))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing to give back: the keys stay removed (the VM is usually being deleted)."""


class GuestinfoScrub(GpuclusterResource, module="vsphere", name="GuestinfoScrub"):
    """Removes a node VM's first-boot secrets from its extraConfig once its guest has read them, or
    when `wait_seconds` ran out.

    Type token: `gpucluster:vsphere:GuestinfoScrub`. Credentials come from the stack
    config (`vsphere:vsphereServer`, `vsphere:user`, `vsphere:password`,
    `vsphere:allowUnverifiedSsl`) or the VSPHERE_* environment, never from inputs.
    """

    vm_id: pulumi.Output[str]
    """The VM's BIOS UUID (pulumi-vsphere's VM id)."""
    node_name: pulumi.Output[str]
    """The node the VM becomes."""
    keys_present: pulumi.Output[list[str]]
    """Secret-bearing guestinfo keys the VM holds (live after a refresh; empty once scrubbed)."""

    def __init__(
        self,
        resource_name: str,
        *,
        vm_id: pulumi.Input[str],
        vm_name: str,
        node_name: str,
        wait_seconds: float,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """
        :param vm_id: the node VM's id (`vsphere.VirtualMachine.id`, its BIOS UUID).
        :param vm_name: the VM's name in vCenter (for messages).
        :param node_name: the node the VM becomes; its guest reports it as its hostname once
            cloud-init has read the user-data.
        :param wait_seconds: how long to wait for that before removing the keys anyway.
        :param opts: depends on nothing but the VM: the keys go whether or not the node joins.
        """
        super().__init__(
            resource_name,
            {
                "vm_id": vm_id,
                "vm_name": vm_name,
                "node_name": node_name,
                "host_name": node_name,
                "wait_seconds": wait_seconds,
                "keys_present": None,
            },
            opts,
        )
