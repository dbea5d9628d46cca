"""Where the VMs go: datacenter, cluster, resource pool, folder, datastore (templates: `templates`)."""

from __future__ import annotations

from components.vcenter.inventory_model import Inventory
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.replicas import replica_need_gb
from stacks.tools.preflight.checks.report import EXISTS_NOTE, OurVms, Report, listing, worker_reservation_mb

LINKED_CLONE_GB = 1.0
"""What a linked clone takes on the datastore at first: its delta disk grows with writes; 1 GB is
a deliberately small estimate (the brief is "linked clones count small")."""


def check_placement(env: Environment, inv: Inventory, report: Report) -> None:
    vc = env.vcenter
    if inv.datacenter is None:
        report.blocker(
            ("vcenter", "datacenter"),
            f"datacenter {vc.datacenter!r} not found (datacenters: {listing(inv.datacenters)})",
        )
    else:
        report.ok(("vcenter", "datacenter"), f"datacenter {vc.datacenter!r} exists")
    if vc.compute_cluster in inv.clusters:
        report.ok(("vcenter", "computeCluster"), f"cluster {vc.compute_cluster!r} exists")
    else:
        report.blocker(
            ("vcenter", "computeCluster"),
            f"cluster {vc.compute_cluster!r} not found (clusters: {listing(inv.clusters)})",
        )
    if vc.resource_pool is not None:
        pools = inv.resource_pools.get(vc.compute_cluster, set())
        wanted = vc.resource_pool.strip("/")
        if wanted in pools:
            report.ok(("vcenter", "resourcePool"), f"resource pool {wanted!r} exists in {vc.compute_cluster!r}")
        else:
            report.blocker(
                ("vcenter", "resourcePool"),
                f"resource pool {wanted!r} not found in cluster {vc.compute_cluster!r}; create it, or remove "
                "the key to use the cluster's root pool",
            )
    folder = vc.folder.strip("/")
    parent = folder.rsplit("/", 1)[0] if "/" in folder else ""
    if inv.datacenter is None:
        return
    if folder in inv.folders:
        report.warn(("vcenter", "folder"), f"VM folder {folder!r} {EXISTS_NOTE}")
    elif parent and parent not in inv.folders:
        report.blocker(
            ("vcenter", "folder"),
            f"parent folder {parent!r} of {folder!r} not found; the program creates only the last folder, "
            f"so create {parent!r} first",
        )
    else:
        report.ok(
            ("vcenter", "folder"),
            f"VM folder {folder!r} can be created under {repr(parent) if parent else 'the VM root'}",
        )


def check_datastore(
    env: Environment, inv: Inventory, report: Report, our_vms: OurVms, stack: str | None = None
) -> None:
    name = env.vcenter.datastore
    store = inv.datastores.get(name)
    if store is None:
        report.blocker(
            ("vcenter", "datastore"), f"datastore {name!r} not found (datastores: {listing(inv.datastores)})"
        )
        return
    if not store.accessible:
        report.blocker(("vcenter", "datastore"), f"datastore {name!r} is not accessible")
        return
    need_gb = 0.0
    reservation = worker_reservation_mb(env)
    for vm_name, (pool_key, _, _) in our_vms.items():
        if vm_name in inv.vms:
            continue  # exists already: its space is taken already
        pool = env.control_plane if pool_key == "controlPlane" else env.gpu_workers
        disk = LINKED_CLONE_GB if env.vm.linked_clone else float(pool.disk_gb)
        reserved = reservation if pool_key == "gpuWorkers" else 0
        swap = max(pool.memory_mb - reserved, 0) / 1024  # the .vswp file covers unreserved memory
        need_gb += disk + swap
    copies_gb = replica_need_gb(env, inv, stack).get(name, 0.0)
    need_gb += copies_gb
    free_gb = store.free_bytes / 2**30
    what = "the new VMs' disks and swap" + (f" and {copies_gb:.0f} GB of template copies" if copies_gb else "")
    detail = f"{need_gb:.0f} GB needed for {what}, {free_gb:.0f} GB free on {name!r}"
    if env.vm.linked_clone:
        detail += f" (linked clones counted at {LINKED_CLONE_GB:.0f} GB each)"
    if need_gb > free_gb:
        report.blocker(("vcenter", "datastore"), detail)
    else:
        report.ok(("vcenter", "datastore"), detail)
