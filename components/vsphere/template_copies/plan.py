"""Where copies of a template go, and which copy each VM clones: pure functions, no Pulumi.

Why copies: every clone is a provisioning operation on the host its source is registered on as well
as on its destination, and an ESXi host runs 16 units of them at a time (VMware performance blog,
"vCenter Limits for Tasks Running at the Same Time", 2021: a linked clone costs 1 unit on each
side, a full clone 2). One template serves 16 linked clones at once however the VMs are spread; a
copy registered on another host serves 16 more.

"Nearest" copy of a VM: on its datastore when it is a linked clone (the program keeps a linked
clone beside its source); then the one on its own host; else the last copy at or before its host in
the stack's host order (wrapping round), so a derived layout, a copy every N hosts, gives each copy
the N hosts from its own on. A VM without a host (placed by DRS) takes a copy by rendezvous hashing
of its name, so adding a copy moves only the VMs the new copy wins.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HOST_UNITS = 16
"""Provisioning units per ESXi host (the blog above; `stacks.tools.plan.deploy_time.durations.Durations.host_units`)."""
DOCUMENTED_HOST_UNITS = 8
"""vCenter's documented cost limit per host ("Limits on Simultaneous Migrations", vCenter Server and
Host Management: "All hosts have a maximum cost per host of 8", a clone costs 1): how many copies
one source makes at a time (`copy_sources`), so that the template's host keeps a unit for the
control plane's clone whichever figure the estate follows."""
LINKED_CLONE_UNITS = 1
FULL_CLONE_UNITS = 2
MAX_NAME = 80
"""vCenter's longest inventory name."""
HASH_CHARS = 8
"""Hex digits of the hash of what shapes a copy, at the end of its name."""


def copy_prefix(base: str, stack: str | None) -> str:
    """What a copy's name starts with, its hash following: `<base>-<stack>-`, cut to leave the hash
    room. The stack's name keeps two stacks with the same template and host apart (issue 32 item 1);
    without one (a copy made before copies carried it), `<base>-`."""
    stem = f"{base}-{stack}" if stack else base
    return f"{stem[: MAX_NAME - HASH_CHARS - 1]}-"


def is_copy_name(name: str, base: str, stack: str | None) -> bool:
    """True for `copy_prefix(base, stack)` and a hash: that stack's copy, not a longer stack's."""
    prefix = copy_prefix(base, stack)
    rest = name[len(prefix) :]
    return name.startswith(prefix) and len(rest) == HASH_CHARS and all(c in "0123456789abcdef" for c in rest)


@dataclass(frozen=True, order=True)
class ReplicaSite:
    """One copy of a template: the host it is registered on, the datastore of its files."""

    host: str
    datastore: str

    @property
    def key(self) -> str:
        """Stable resource-name key: reordering the list or adding a copy renames none."""
        return f"{self.host}-{self.datastore}"


def clones_per_source(*, linked: bool, host_units: int = HOST_UNITS) -> int:
    """How many clones one source serves in one wave, keeping a unit pair for the VM on its own host.

    A source host gives `units` to every clone from it and, as a destination, `units` more to the
    clone that lands on it: n * units + units <= host_units."""
    units = LINKED_CLONE_UNITS if linked else FULL_CLONE_UNITS
    return max(1, host_units // units - 1)


def derived_sites(worker_hosts: Sequence[str | None], *, datastore: str, linked: bool) -> list[ReplicaSite]:
    """The default layout: none while one source serves every worker in one wave; beyond that a copy
    on the first host of every group of `clones_per_source` workers, in the workers' order. The
    template itself serves nobody then: its host also runs the copies' own clones."""
    per_source = clones_per_source(linked=linked)
    if len(worker_hosts) <= per_source:
        return []
    hosts = list(dict.fromkeys(host for host in worker_hosts if host is not None))
    if not hosts:
        return []
    counts = {host: sum(1 for h in worker_hosts if h == host) for host in hosts}
    sites: list[ReplicaSite] = []
    in_group = per_source  # start a group at the first host
    for host in hosts:
        if in_group + counts[host] > per_source:
            sites.append(ReplicaSite(host=host, datastore=datastore))
            in_group = 0
        in_group += counts[host]
    return sites


def copy_sources(sites: Sequence[ReplicaSite], *, linked: bool) -> dict[str, ReplicaSite | None]:
    """Site key -> the copy that copy clones (None: the template itself): with linked clones a tree,
    breadth first.

    Why a tree: every copy cloned from the template is a provisioning operation on the template's
    host, which runs 8 at a time (`DOCUMENTED_HOST_UNITS`); 35 copies from it (512 workers) queue
    five deep there, and the control plane's own clone, from a template on that host too, queues
    behind them, which delays `kubeadm init` and with it every worker's join (BENCHMARKS.md).
    So the template makes the first `clones_per_source` copies (7 linked), in one wave beside the
    control plane's clone; each later copy clones one of the copies of the level before, round
    robin (a copy is a template with a snapshot, as the template is: `TemplateReplica`). Two levels
    serve 7 + 49 copies, some 840 workers; at 64 workers every copy is still the template's.

    What it costs a worker: a linked copy of a copy adds the copy's own, nearly empty, delta disk to
    the chain below a worker's disk (a read that misses a delta falls through to its parent: vSphere
    Web Services SDK Programming Guide, "Linked Virtual Machines and Disk Backings"; VMware
    Workstation Pro's "Linked Clones": a linked clone of a linked clone performs less well, so keep
    chains short); two levels are two such deltas, far inside the snapshot tree depth of 31 vSphere
    allows (Dell PowerStore guide, "VMware snapshot limitations"). Stable as a stack grows: a new
    copy comes last in the sites' order, so the copies before it keep their source (a copy whose
    source changes is replaced, and its workers roll, `TemplateReplica`)."""
    if not linked:
        # Full copies all clone the template: a level of the tree would add a full clone (8
        # minutes by default) to every worker's path below it; at 64 workers the model gave 34m45s
        # for a 26m35s bound against 26m35s and 18m30s with the template as every copy's source.
        return dict.fromkeys((site.key for site in sites), None)
    fan_out = clones_per_source(linked=True, host_units=DOCUMENTED_HOST_UNITS)
    sources: dict[str, ReplicaSite | None] = {}
    level: list[ReplicaSite | None] = [None]
    rest = list(sites)
    while rest:
        taken, rest = rest[: len(level) * fan_out], rest[len(level) * fan_out :]
        for i, site in enumerate(taken):
            # A linked copy hangs off a source on its own datastore (as every linked clone here
            # does); a copy with none such in the level before clones the template.
            fits = [s for s in level if s is None or s.datastore == site.datastore] or [None]
            sources[site.key] = fits[i % len(fits)]
        level = list(taken)
    return sources


def _rendezvous(name: str, sites: Sequence[ReplicaSite]) -> ReplicaSite:
    return max(sites, key=lambda site: (hashlib.sha256(f"{site.host}/{site.datastore}/{name}".encode()).digest(), site))


def nearest_site(
    name: str,
    host: str | None,
    *,
    datastore: str,
    linked: bool,
    sites: Sequence[ReplicaSite],
    host_order: Sequence[str],
) -> ReplicaSite | None:
    """The copy a VM named `name` on `host` (None: DRS places it) and `datastore` clones; None: the
    template itself (no copy can serve it)."""
    candidates = [site for site in sites if site.datastore == datastore] if linked else list(sites)
    if not candidates:
        return None
    if not linked:  # a full clone prefers a copy on its own datastore, but takes any
        candidates = [site for site in candidates if site.datastore == datastore] or candidates
    if host is None:
        return _rendezvous(name, candidates)
    here = [site for site in candidates if site.host == host]
    if here:
        return here[0]
    position = {h: i for i, h in enumerate(host_order)}
    if host not in position:
        return _rendezvous(name, candidates)
    mine = position[host]
    # The last copy at or before the VM's host; wrapping round: the last copy of all.
    ranked = sorted(candidates, key=lambda site: ((mine - position.get(site.host, mine + 1)) % len(host_order), site))
    return ranked[0]


def assign(
    nodes: Mapping[str, str | None],
    *,
    datastore: str,
    linked: bool,
    sites: Sequence[ReplicaSite],
    host_order: Sequence[str],
) -> dict[str, ReplicaSite | None]:
    """Node name (to its host) -> the copy it clones (None: the template)."""
    return {
        name: nearest_site(name, host, datastore=datastore, linked=linked, sites=sites, host_order=host_order)
        for name, host in nodes.items()
    }
