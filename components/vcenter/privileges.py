"""The session user's missing privileges on named objects: `AuthorizationManager.
HasPrivilegeOnEntities`, which answers with the user's effective privileges on each entity (the
role of the permission that applies there, inherited down the inventory). Its own required
privilege is System.Read on the entities (vSphere Web Services API), which every role but
NoAccess holds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pyVmomi import vim

from components.vcenter.lookups import collect_properties

KINDS: dict[str, type] = {
    "Datacenter": vim.Datacenter,
    "ClusterComputeResource": vim.ClusterComputeResource,
    "Datastore": vim.Datastore,
    "HostSystem": vim.HostSystem,
    "VirtualMachine": vim.VirtualMachine,
}
PARENT_OF_VM = "VirtualMachine.parent"
"""A kind that names a VM and means its folder (the template's folder, where its copies go)."""


def _resolve(si: Any, root: Any, kind: str, names: set[str]) -> dict[str, Any]:
    vimtype = KINDS["VirtualMachine" if kind == PARENT_OF_VM else kind]
    paths = ["name", "parent"] if kind == PARENT_OF_VM else ["name"]
    found: dict[str, Any] = {}
    for obj, props in collect_properties(si, root, vimtype, paths):
        name = props.get("name")
        if name in names and name not in found:
            found[name] = props.get("parent") if kind == PARENT_OF_VM else obj
    return {name: obj for name, obj in found.items() if obj is not None}


def missing_privileges(
    si: Any, datacenter: str, wanted: Mapping[tuple[str, str], Collection[str]]
) -> dict[tuple[str, str], tuple[str, ...]]:
    """(kind, name) -> the privileges the session's user lacks there (empty: holds them all).
    Objects that do not exist are left out: the other checks report them."""
    content = si.RetrieveContent()
    root = content.rootFolder
    for dc, props in collect_properties(si, root, vim.Datacenter, ["name"]):
        if props.get("name") == datacenter:
            root = dc
    session = content.sessionManager.currentSession.key
    auth = content.authorizationManager
    by_kind: dict[str, set[str]] = {}
    for kind, name in wanted:
        by_kind.setdefault(kind, set()).add(name)
    objects = {
        (kind, name): obj
        for kind, names in by_kind.items()
        for name, obj in (
            {datacenter: root}.items()
            if kind == "Datacenter" and root is not content.rootFolder
            else _resolve(si, root, kind, names).items()
        )
    }
    missing: dict[tuple[str, str], tuple[str, ...]] = {}
    for key, obj in objects.items():
        privileges = sorted(set(wanted[key]))
        [answer] = auth.HasPrivilegeOnEntities(entity=[obj], sessionId=session, privId=privileges)
        missing[key] = tuple(sorted(p.privId for p in answer.privAvailability or [] if not p.isGranted))
    return missing
