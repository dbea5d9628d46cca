"""GuestinfoScrub: once a node has joined, remove its first-boot secrets from its VM's extraConfig.

Why: every node's user-data carries the join token, a control-plane node's the cluster, etcd and
front-proxy CA keys and the service-account key (`components.k8s.node_bootstrap.user_data`). It
reaches the guest as `guestinfo.userdata` in the VM's extraConfig (`first_boot`), which anyone
with read access to the VM in vCenter (any role with System.Read on it: `config.extraConfig` is
an ordinary VM property), to its datastore (the `.vmx` file) or to its backups can read. cloud-init's
`redact` does not close that: it overwrites the key from inside the guest through VMware Tools
(`vmware-rpctool "info-set guestinfo.userdata ---"`, cloudinit/sources/DataSourceVMware.py,
`guestinfo_redact_keys`), a guest-side variable that reaches the `.vmx` only when the VM is next
power-cycled (open-vm-tools issue 288), so vCenter keeps showing the original until then; on a VM
whose cloud-init never ran, forever. pulumi-vsphere never blanks it either: the VM ignores
changes to these keys (`node_pool`). Cluster API's vSphere provider leaves it in place
(kubernetes-sigs/cluster-api-provider-vsphere issue 582, open).

What it does: `create` waits until the node has joined (its Node is registered and Ready and, on a
control-plane node, kubeadm's `node-role.kubernetes.io/control-plane` label is set: the last phase
of a control-plane join, after its etcd member joined), then removes `guestinfo.userdata` and
`guestinfo.userdata.encoding` from the VM's extraConfig with `ReconfigVM_Task` (an OptionValue with
an empty value removes the key: vSphere API reference, VirtualMachineConfigSpec.extraConfig, "Keys
with empty values will be removed"; pyvmomi docs/vim/vm/ConfigSpec.rst) and reads the VM back: a
key still there fails the step, naming it. `read` reports the keys present live
(`secret_keys_present`), so a refresh sees them come back and the next `up` removes them again.
A replaced VM has a new id, so it gets a new scrub, which waits for its own join.

Why a joined node no longer needs them: cloud-init reads user-data once per instance
(`write_files` and `runcmd` are per-instance modules) and the bootstrap has written everything it
needs to disk by the time the kubelet registers. The metadata keys stay: they carry no secret
(hostname, static network, instance-id) and cloud-init's VMware datasource finds its data on each
boot by them (`_get_data`: "if md or ud or vd"); without them a later boot would find no
datasource, fall back to DataSourceNone with another instance-id and re-run every per-instance
module on a running node.

Why it waits in `create` rather than running on the next `up`: a scrub that only looked once would
leave a new node's keys in vCenter until someone ran the stack again. The wait holds one of the
dynamic provider host's worker threads per node, so the wiring makes it depend on the API
readiness check and the join token (`__main__.py`): nothing a node's join needs waits behind it.
A node that does not join within `timeout_seconds` fails the step, naming the node and saying its
keys are still in vCenter; the keys are kept then (a VM whose first boot has not run yet still
needs them) and the next `up` waits again.

Who can still read them, and when: docs/bootstrap.md, "Secrets in guestinfo".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic
from pyVmomi import vim

from components.dynamic_resource import DynamicResource
from components.k8s.api.client import KubeApi, KubeconfigError
from components.k8s.rollout.drain import POLL_SECONDS, Api
from components.k8s.rollout.steps import CONTROL_PLANE_LABEL, NodeState, NotYet, RolloutError, node_state
from components.vcenter.errors import VsphereError
from components.vcenter.lookups import find_vm_by_uuid
from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy, VsphereProvider, is_unknown, public_props

SECRET_GUESTINFO_KEYS = ("guestinfo.userdata", "guestinfo.userdata.encoding")
"""The extraConfig keys that carry (or describe) the user-data; `first_boot.GUESTINFO_KEYS` has
them beside the metadata keys, which stay."""
DEFAULT_JOIN_TIMEOUT_SECONDS = 45 * 60
"""How long a node may take to join (clone, first boot, kubeadm): the rollout's default."""
RECONFIGURE_TIMEOUT_SECONDS = 300.0


class NodeNotJoined(Exception):
    """The node did not join in time; its keys are still in the VM's extraConfig."""


# ---------------------------------------------------------------------------------------------
# The Kubernetes side: has the node joined?


def why_not_joined(state: NodeState, *, control_plane: bool) -> str:
    """ "" once the node has joined, else what it still lacks."""
    if not state.found:
        return "it has not registered"
    if not state.ready:
        return "it is not Ready"
    if control_plane and CONTROL_PLANE_LABEL not in state.labels:
        return "kubeadm has not marked it a control-plane node: its join has not finished"
    return ""


@dataclass(frozen=True)
class JoinWait:
    timeout_seconds: float = DEFAULT_JOIN_TIMEOUT_SECONDS
    poll_seconds: float = POLL_SECONDS
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def wait_until_joined(api: Api, node: str, *, control_plane: bool, wait: JoinWait = JoinWait()) -> None:
    """Return once `node` has joined; NodeNotJoined after `wait.timeout_seconds`. An API server
    that does not answer (a control-plane member being replaced) is waited out like a node that
    has not joined yet."""
    deadline = wait.clock() + wait.timeout_seconds
    while True:
        try:
            last = why_not_joined(node_state(api, node), control_plane=control_plane)
        except NotYet as error:
            last = f"the API server did not answer ({error})"
        except RolloutError as error:
            last = str(error)
        if not last:
            return
        if wait.clock() >= deadline:
            raise NodeNotJoined(
                f"node {node} did not join within {wait.timeout_seconds / 60:g} minutes ({last}); its first-boot "
                "secrets (join token, and on a control-plane node the CA keys) are still in its VM's "
                "guestinfo.userdata in vCenter. Look at the node (journalctl -u gpucluster-bootstrap), then run "
                "pulumi up again, which waits again"
            )
        wait.sleep(wait.poll_seconds)


# ---------------------------------------------------------------------------------------------
# The vCenter side (pyvmomi, on one VM)


def secret_keys_present(vm: Any) -> list[str]:
    """Which of `SECRET_GUESTINFO_KEYS` the VM's extraConfig holds, whatever their value (a
    redacted "---" still counts: only an absent key is scrubbed)."""
    present = {option.key for option in vm.config.extraConfig or []}
    return [key for key in SECRET_GUESTINFO_KEYS if key in present]


def remove_keys(vm: Any, keys: list[str]) -> None:
    """Remove extraConfig keys: each sent with an empty value (VirtualMachineConfigSpec.extraConfig).
    Needs VirtualMachine.Config.AdvancedConfig on the VM; a powered-on VM takes it (no restart)."""
    spec = vim.vm.ConfigSpec(extraConfig=[vim.option.OptionValue(key=key, value="") for key in keys])
    wait_for_task(
        vm.ReconfigVM_Task(spec=spec),
        timeout=RECONFIGURE_TIMEOUT_SECONDS,
        object_name=vm.name,
        what="removing first-boot secrets from extraConfig",
    )


# ---------------------------------------------------------------------------------------------
# Provider


class GuestinfoScrubProvider(VsphereProvider):
    """Dynamic provider for `GuestinfoScrub`."""

    def __init__(self, *, poll_seconds: float = POLL_SECONDS, retry: RetryPolicy | None = None) -> None:
        super().__init__(retry=retry)
        self.poll_seconds = poll_seconds

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.CheckResult:
        inputs = public_props(news)
        failures: list[pulumi.dynamic.CheckFailure] = []
        vm_id = inputs.get("vm_id")
        if not is_unknown(vm_id):
            if not isinstance(vm_id, str) or not vm_id.strip():
                failures.append(pulumi.dynamic.CheckFailure("vm_id", "must be a VM BIOS UUID"))
            else:
                inputs["vm_id"] = vm_id.strip().lower()
        node = inputs.get("node_name")
        if not is_unknown(node) and (not isinstance(node, str) or not node.strip()):
            failures.append(pulumi.dynamic.CheckFailure("node_name", "must be the node's Kubernetes name"))
        timeout = inputs.get("timeout_seconds")
        if not is_unknown(timeout) and (not isinstance(timeout, int | float) or timeout <= 0):
            failures.append(pulumi.dynamic.CheckFailure("timeout_seconds", "must be a positive number of seconds"))
        return pulumi.dynamic.CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        # A new VM (a replacement) is a new scrub, whose create waits for the new VM's join.
        replaces = [key for key in ("vm_id", "node_name") if olds.get(key) != news.get(key)]
        changed = any(olds.get(key) != news.get(key) for key in ("vm_name", "control_plane", "timeout_seconds"))
        # Drift: a key came back (put there by hand, or by a VM update of another tool).
        drift = bool(olds.get("keys_present"))
        return pulumi.dynamic.DiffResult(changes=bool(replaces) or changed or drift, replaces=replaces)

    def _outs(self, props: dict[str, Any], keys_present: list[str]) -> dict[str, Any]:
        return {
            "vm_id": props["vm_id"],
            "vm_name": props.get("vm_name", ""),
            "node_name": props["node_name"],
            "control_plane": bool(props.get("control_plane")),
            "kubeconfig": props["kubeconfig"],
            "timeout_seconds": props.get("timeout_seconds", DEFAULT_JOIN_TIMEOUT_SECONDS),
            "keys_present": keys_present,
        }

    def _scrub(self, props: dict[str, Any]) -> list[str]:
        """Remove the keys the VM holds, then read it back; the keys still there (none, or an error)."""
        vm_id: str = props["vm_id"]
        label = props.get("vm_name") or vm_id

        def op(si: Any) -> list[str]:
            vm = find_vm_by_uuid(si, vm_id)
            if vm is None:
                raise VsphereError(f"VM {label} (BIOS UUID {vm_id}) not found in vCenter", object_name=label)
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

        return self.run(op, what=f"remove first-boot secrets from VM {label}")

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        node = str(props["node_name"])
        try:
            api = KubeApi(str(props["kubeconfig"]))
        except KubeconfigError as error:
            raise NodeNotJoined(f"node {node}: cannot ask the cluster whether it joined: {error}") from None
        wait_until_joined(
            api,
            node,
            control_plane=bool(props.get("control_plane")),
            wait=JoinWait(
                timeout_seconds=float(props.get("timeout_seconds") or DEFAULT_JOIN_TIMEOUT_SECONDS),
                poll_seconds=self.poll_seconds,
            ),
        )
        left = self._scrub(props)
        pulumi.log.info(f"node {node}: first-boot secrets removed from VM {props.get('vm_name') or props['vm_id']}")
        return pulumi.dynamic.CreateResult(id_=f"guestinfo-scrub:{props['vm_id']}", outs=self._outs(props, left))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        # The node joined when this scrub was created: keys seen again are removed at once.
        return pulumi.dynamic.UpdateResult(outs=self._outs(news, self._scrub(news)))

    def read(self, id_: str, props: dict[str, Any]) -> pulumi.dynamic.ReadResult:
        vm_id = str(props["vm_id"])

        def op(si: Any) -> list[str] | None:
            vm = find_vm_by_uuid(si, vm_id)
            return None if vm is None else secret_keys_present(vm)

        present = self.run(op, what=f"read extraConfig of VM {props.get('vm_name') or vm_id}")
        if present is None:
            return pulumi.dynamic.ReadResult(id_="", outs={})  # the VM is gone, and its keys with it
        return pulumi.dynamic.ReadResult(id_=id_, outs=self._outs(props, present))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing to give back: the keys stay removed (the VM is usually being deleted)."""


@dataclass(frozen=True, kw_only=True)
class GuestinfoScrubArgs:
    vm_id: pulumi.Input[str]
    """The node VM's id (`vsphere.VirtualMachine.id`, its BIOS UUID)."""
    vm_name: str
    """The VM's name in vCenter (for messages)."""
    node_name: str
    """The node's Kubernetes name (the guest's hostname)."""
    control_plane: bool
    """Whether the node joins as a control-plane member: then it has joined only once kubeadm
    marked it one."""
    kubeconfig: pulumi.Input[str]
    """Admin kubeconfig (a secret; encrypted in state), to ask the API server whether it joined."""
    timeout_seconds: int = DEFAULT_JOIN_TIMEOUT_SECONDS
    """How long `create` waits for the join (default 2,700: 45 minutes; the stack passes
    `kubernetes.rolloutTimeoutMinutes`)."""


class GuestinfoScrub(DynamicResource, module="vsphere", name="GuestinfoScrub"):
    """Removes a node VM's first-boot secrets from its extraConfig once the node has joined.

    Type token: `pulumi-python:dynamic/vsphere:GuestinfoScrub`. vCenter credentials come from the
    stack config (`vsphere:vsphereServer`, `vsphere:user`, `vsphere:password`,
    `vsphere:allowUnverifiedSsl`) or the VSPHERE_* environment, never from inputs; the kubeconfig
    is an input, a secret.
    """

    vm_id: pulumi.Output[str]
    """The VM's BIOS UUID (pulumi-vsphere's VM id)."""
    node_name: pulumi.Output[str]
    """The Kubernetes node the VM becomes."""
    keys_present: pulumi.Output[list[str]]
    """Secret-bearing guestinfo keys the VM holds (live after a refresh; empty once scrubbed)."""

    def __init__(
        self, resource_name: str, args: GuestinfoScrubArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(
            GuestinfoScrubProvider(),
            resource_name,
            {
                "vm_id": args.vm_id,
                "vm_name": args.vm_name,
                "node_name": args.node_name,
                "control_plane": args.control_plane,
                "kubeconfig": pulumi.Output.secret(args.kubeconfig),
                "timeout_seconds": args.timeout_seconds,
                "keys_present": None,
            },
            opts,
        )
