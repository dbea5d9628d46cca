"""The deployment-time estimate of a plan: which operation each resource is, and how long it takes.

Every duration below is a default a site can override (`python -m stacks plan --durations FILE`,
a JSON or YAML mapping of these field names to seconds). Each says where its number comes from;
they are orders of magnitude for a healthy estate, not promises. The model (`model`)
turns them into a bound and an estimate; this module only decides what a resource costs.

What Pulumi waits for is not all a user waits for: nothing in the program waits for the GPU
workers to join (Kubernetes admits their pods when they do), so the report gives two times: when
`pulumi up` returns, and when the last worker is ready for training.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from stacks.tools.plan.deploy_time.model import Operation

TEMPLATE_HOST = "host:template"
"""The ESXi host the template is registered on: every clone is a provisioning operation there too."""


@dataclass(frozen=True)
class Durations:
    """Seconds per kind of operation, and vCenter's limits; every field can be overridden."""

    linked_clone: float = 20
    """A linked clone from the template's snapshot: a delta disk and a VM config, no data copied."""
    full_clone: float = 480
    """A full clone copies the template's disk: 50 GB at ~100 MB/s of datastore throughput (a
    mid-range array under other load), plus the reconfigure."""
    snapshot: float = 5
    """A snapshot of a powered-off VM without memory (a template copy's, before it is marked a
    template): a delta disk and a descriptor, nothing copied."""
    power_on: float = 10
    """Power-on task of a VM with reserved memory (memory is locked to max: vGPU VMs)."""
    guest_boot: float = 60
    """Firmware, kernel and cloud-init to the bootstrap unit (Rocky/RHEL 9 on EFI)."""
    kubeadm_init: float = 150
    """Image pulls for the control plane (~1 GB from a registry mirror), `kubeadm init`, Calico."""
    kubeadm_join: float = 60
    """A worker's image pulls and `kubeadm join` once the API server answers."""
    drain: float = 60
    """A node's drain before its VM goes (day two): evictions, then the pods' termination grace period
    (Kubernetes' default `terminationGracePeriodSeconds` is 30 s) and the API round trips."""
    vm_destroy: float = 15
    """Power-off and delete of a replaced or removed VM."""
    guest_shutdown: float = 30
    """A guest shutdown through VMware Tools before a reboot or a vGPU profile change."""
    node_settle: float = 60
    """After a replaced node joined: until it is Ready and, on a GPU worker, its device plugin
    advertises the GPU again (the rolling-update settle waits for that before the next node goes)."""
    host_reconfigure: float = 10
    """One host advanced-option or firewall call (`Net.PVRDMAVmknic`, ruleset `pvrdma`)."""
    host_graphics: float = 90
    """Default graphics type set, then the host's `xorg` service restarted (VMware's procedure)."""
    vm_reconfigure: float = 10
    """A VM reconfigure without a power cycle: `GuestinfoScrub` removing the first-boot guestinfo
    keys from the VM's extraConfig once its guest read them."""
    vgpu_attach: float = 5
    """The vGPU attachment's create: it reads the VM's devices and checks the vGPU the GPU template
    carried (no power cycle; before `vcenter.gpuTemplate` it powered the VM off and on, ~45 s)."""
    switch_member: float = 20
    """One host joining the distributed switch with its RDMA uplink (a switch reconfigure)."""
    switch: float = 30
    """Distributed switch with every host's uplink added (one task, hosts join in it)."""
    port_group: float = 10
    vmknic: float = 10
    folder: float = 2
    drs_rule: float = 5
    """A DRS group or rule: one cluster reconfiguration."""
    addon_rollout: float = 60
    """A Deployment or DaemonSet becoming ready: image pull and start (Pulumi awaits it)."""
    gpu_operator: float = 600
    """GPU Operator Helm release with the vGPU guest driver container loading its kernel modules."""
    kubernetes_object: float = 2
    """A Kubernetes object Pulumi does not await beyond its creation (Namespace, ConfigMap, MPIJob)."""
    crd: float = 5
    """A CustomResourceDefinition becoming established."""
    instant: float = 0
    """Keys, certificates, random tokens and providers: computed locally."""
    host_units: int = 8
    """Concurrent provisioning operations per ESXi host: "All hosts have a maximum cost per host of
    8"; cloning and other provisioning operations cost 1 (VMware, "Limits on Simultaneous
    Migrations", vCenter Server and Host Management 6.5/6.7; no later edition changes it). A clone
    takes its cost on its source host (the template's) and on its destination. (A 2021 VMware
    performance blog, "vCenter Limits for Tasks Running at the Same Time", gives 16 units for
    6.x/7.x hosts; set 16 here if you trust it for your estate.)"""
    linked_clone_units: int = 1
    full_clone_units: int = 1
    """The documentation's cost of a provisioning operation, full or linked."""
    datastore_units: int = 128
    """Maximum cost per datastore ("Limits on Simultaneous Migrations", vSphere docs), 1 per clone."""
    parallel: int | None = None
    """`pulumi up --parallel`; None: the CLI's default for the runner (`engine`: 4 x its CPUs)."""


def load_durations(path: Path | None) -> Durations:
    """The defaults, with the fields a JSON/YAML file names overridden. Raises ValueError on a typo."""
    if path is None:
        return Durations()
    values = yaml.safe_load(path.read_text()) or {}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a mapping of duration names to seconds")
    known = {f.name for f in fields(Durations)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{path}: unknown duration(s) {unknown}; known: {sorted(known)}")
    bad = [k for k, v in values.items() if not (v is None and k == "parallel") and not isinstance(v, int | float)]
    if bad:
        raise ValueError(f"{path}: {bad} must be numbers of seconds (or units)")
    return replace(Durations(), **values)


_VM = "vsphere:index/virtualMachine:VirtualMachine"
_REPLICA = "gpucluster:vsphere:TemplateReplica"
_NODE_JOINED = "gpucluster:kubernetes:NodeJoined"
_READY = "gpucluster:kubernetes:ApiServerReady"
_TIMES_BY_TYPE = {
    "gpucluster:vsphere:GuestinfoScrub": "vm_reconfigure",
    "vsphere:index/distributedVirtualSwitch:DistributedVirtualSwitch": "switch",
    "vsphere:index/distributedPortGroup:DistributedPortGroup": "port_group",
    "vsphere:index/vnic:Vnic": "vmknic",
    "vsphere:index/folder:Folder": "folder",
    "vsphere:index/computeClusterHostGroup:ComputeClusterHostGroup": "drs_rule",
    "vsphere:index/computeClusterVmGroup:ComputeClusterVmGroup": "drs_rule",
    "vsphere:index/computeClusterVmHostRule:ComputeClusterVmHostRule": "drs_rule",
    "vsphere:index/computeClusterVmAntiAffinityRule:ComputeClusterVmAntiAffinityRule": "drs_rule",
    "gpucluster:vsphere:PvrdmaHostSettings": "host_reconfigure",
    "gpucluster:vsphere:HostGraphicsMode": "host_graphics",
    "gpucluster:vsphere:VgpuAttachment": "vgpu_attach",
    "gpucluster:vsphere:DvsHostMember": "switch_member",
    "kubernetes:helm.sh/v3:Release": "gpu_operator",
    "kubernetes:yaml/v2:ConfigFile": "crd",
}
_AWAITED_KINDS = {"Deployment", "DaemonSet", "StatefulSet"}
_REMOTE_COMPONENTS = {"kubernetes:yaml/v2:ConfigGroup", "kubernetes:yaml/v2:ConfigFile"}
"""Components the Kubernetes provider expands at deploy time: their objects are the operations."""


@dataclass(frozen=True)
class Resource:
    """What the model needs of a planned resource (from `RecordedResource` or `resources.json`)."""

    urn: str
    type: str
    name: str
    custom: bool
    dependencies: tuple[str, ...]
    inputs: Mapping[str, Any]


def resources_from_plan(entries: Iterable[Any]) -> list[Resource]:
    """Accepts `RecordedResource`s or `resources.json` entries."""
    found = []
    for entry in entries:
        get = entry.get if isinstance(entry, Mapping) else lambda key, e=entry: getattr(e, key, None)
        # A resource with an explicit provider waits for that provider (the Kubernetes provider
        # waits for the API server), although the SDK does not list it among the dependencies.
        provider = get("provider")
        provider_urn = (provider.rsplit("::", 1)[0],) if isinstance(provider, str) and "::" in provider else ()
        found.append(
            Resource(
                urn=str(get("urn")),
                type=str(get("type")),
                name=str(get("name")),
                custom=bool(get("custom")),
                dependencies=tuple(get("dependencies") or ()) + provider_urn,
                inputs=get("inputs") or {},
            )
        )
    return found


def _clone_holds(source: str, destination: object, datastore: object, units: int) -> dict[str, int]:
    """A clone's units on its source's host and its destination host (both, when they are one host:
    the blog counts each side), and one on the destination datastore."""
    holds = {source: units}
    if isinstance(destination, str):
        holds[f"host:{destination}"] = holds.get(f"host:{destination}", 0) + units
    if isinstance(datastore, str):
        holds[f"datastore:{datastore}"] = 1
    return holds


def _kind_seconds_holds(
    resource: Resource, d: Durations, source_host: str = TEMPLATE_HOST
) -> tuple[str, float, dict[str, int]]:
    """The kind of work a resource is, how long it takes, and the vCenter capacity it holds.
    `source_host`: the capacity of the host a VM is cloned from (a template copy's host, or the
    template's)."""
    if resource.type == _VM:
        clone = resource.inputs.get("clone") or {}
        linked = bool(clone.get("linkedClone")) if isinstance(clone, Mapping) else False
        units = d.linked_clone_units if linked else d.full_clone_units
        holds = _clone_holds(
            source_host, resource.inputs.get("hostSystemId"), resource.inputs.get("datastoreId"), units
        )
        kind = "linked clone + power-on" if linked else "full clone + power-on"
        return kind, (d.linked_clone if linked else d.full_clone) + d.power_on, holds
    if resource.type == _REPLICA:
        # A copy of the template: a clone from its source's host (the template's, or the copy's it
        # clones: `copy_sources`) onto the copy's, then its snapshot.
        linked = bool(resource.inputs.get("linked"))
        units = d.linked_clone_units if linked else d.full_clone_units
        holds = _clone_holds(source_host, resource.inputs.get("host_id"), resource.inputs.get("datastore_id"), units)
        kind = "template copy (linked)" if linked else "template copy (full)"
        return kind, (d.linked_clone if linked else d.full_clone) + d.snapshot, holds
    if resource.type == "gpucluster:kubernetes:ApiServerReady":
        return "guest boot + kubeadm init", d.guest_boot + d.kubeadm_init, {}
    if resource.type == "gpucluster:vsphere:InitPkiDelivery":
        # Waits for the init node's boot to ask for its keys, then one reconfigure; in parallel
        # with (and shorter than) ApiServerReady, which waits for kubeadm init after it.
        return "guest boot + key delivery", d.guest_boot + d.vm_reconfigure, {}
    if resource.type == "kubernetes:yaml/v2:ConfigGroup":
        objs = resource.inputs.get("objs") or []
        kinds = {o.get("kind") for o in (objs if isinstance(objs, list) else [objs]) if isinstance(o, Mapping)}
        if kinds & _AWAITED_KINDS:
            return "add-on rollout", d.addon_rollout, {}
        return "Kubernetes objects", d.kubernetes_object, {}
    if resource.type.startswith("kubernetes:") and resource.type not in _TIMES_BY_TYPE:
        return "Kubernetes objects", d.kubernetes_object, {}  # e.g. the join token's Secret
    field_name = _TIMES_BY_TYPE.get(resource.type, "instant")
    return field_name.replace("_", " "), float(getattr(d, field_name)), {}


def _named(resource: Resource) -> str:
    """The resource as a step of the path names it. A Kubernetes object by its kind too: a Role and
    its RoleBinding share a name (control-plane-join-reader), and the path would read as one step
    twice."""
    if resource.type.startswith("kubernetes:") and resource.type != "kubernetes:yaml/v2:ConfigGroup":
        return f"{resource.type.rsplit(':', 1)[-1]} {resource.name}"
    return resource.name


def operations(resources: Iterable[Resource], d: Durations) -> list[Operation]:
    """One operation per custom resource, plus each GPU worker's boot and join (guest work)."""
    custom = [r for r in resources if r.custom or r.type in _REMOTE_COMPONENTS]
    keys = {r.urn for r in custom}
    ops: list[Operation] = []
    ready = [r.urn for r in custom if r.type == _READY]
    attachments = {
        dep: r.urn for r in custom if r.type == "gpucluster:vsphere:VgpuAttachment" for dep in r.dependencies
    }
    # A VM cloned from a template copy depends on it (its clone source is the copy's uuid): the
    # clone's source side is the copy's host.
    copy_hosts = {
        r.urn: f"host:{r.inputs['host_id']}"
        for r in custom
        if r.type == _REPLICA and isinstance(r.inputs.get("host_id"), str)
    }
    init_vms = {dep for r in custom if r.type == _READY for dep in r.dependencies}
    vm_urns = {r.urn for r in custom if r.type == _VM}
    for r in custom:
        source = next((copy_hosts[dep] for dep in r.dependencies if dep in copy_hosts), TEMPLATE_HOST)
        kind, seconds, holds = _kind_seconds_holds(r, d, source)
        depends_on = tuple(dict.fromkeys(dep for dep in r.dependencies if dep in keys))
        if r.type == _NODE_JOINED:
            # `pulumi up` waits, per node, until it joined (components/k8s/join/joined.py): a
            # provider operation as long as the node's boot and `kubeadm join`, from when its VM
            # (with its vGPU) and the API server are ready; the init node joined with `kubeadm init`.
            vms = [dep for dep in r.dependencies if dep in vm_urns]
            joining = [vm for vm in vms if vm not in init_vms]
            kind, seconds = (
                ("wait for node join", d.guest_boot + d.kubeadm_join) if joining else ("wait for node join", 0.0)
            )
            depends_on = tuple(dict.fromkeys((*depends_on, *(attachments[vm] for vm in vms if vm in attachments))))
        ops.append(Operation(r.urn, f"{kind}: {_named(r)}", seconds, depends_on, holds, kind=kind))
        if r.type == _VM and r.urn in attachments and ready:
            # A GPU worker boots for good once its vGPU is attached, then joins the cluster.
            ops.append(
                Operation(
                    f"{r.urn}#join",
                    f"guest boot + kubeadm join: {r.name}",
                    d.guest_boot + d.kubeadm_join,
                    (attachments[r.urn], *ready),
                    engine_slot=False,
                    kind="guest boot + kubeadm join",
                )
            )
    return ops


def durations_table() -> dict[str, Any]:
    """The defaults, for docs and `--json`."""
    return asdict(Durations())
