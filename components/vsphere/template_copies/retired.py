"""Retired template copies: those `TemplateReplica`'s delete left in vCenter, renamed
`<name>-retired`, because linked clones still hung off them (replica.py's module doc). Once the
rollout finished nothing hangs off them; they belong to no stack's state any more (Pulumi dropped
the resource when its delete returned), so only this finds and removes them. Plain pyVmomi, no
Pulumi: `python -m stacks retired-copies` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyVmomi import vim

from components.vcenter.lookups import collect_properties
from components.vcenter.tasks import wait_for_task
from components.vsphere.template_copies.chains import MARK, RETIRED, dependents


@dataclass(frozen=True)
class RetiredCopy:
    name: str
    uuid: str
    dependents: tuple[str, ...]
    """The VMs that still hang off it (linked clones of it): while any does, it stays."""
    vm: Any = None


def retired_copies(si: Any, template: str, datacenter: str | None = None) -> list[RetiredCopy]:
    """The retired copies of `template`: templates named `<template>-...-retired` that carry the
    copy's mark (`gpucluster.templateReplica`, set by its clone), inside the named datacenter
    (everywhere when it is None or not found). A VM without the mark is never taken for one."""
    root = si.RetrieveContent().rootFolder
    for dc, props in collect_properties(si, root, vim.Datacenter, ["name"]):
        if props.get("name") == datacenter:
            root = dc
    found = []
    paths = ["name", "config.template", "config.uuid", "config.extraConfig"]
    for vm, props in collect_properties(si, root, vim.VirtualMachine, paths):
        name = str(props.get("name", ""))
        if not (name.startswith(f"{template}-") and name.endswith(RETIRED) and props.get("config.template")):
            continue
        if not any(option.key == MARK for option in props.get("config.extraConfig") or []):
            continue
        found.append(
            RetiredCopy(name=name, uuid=str(props.get("config.uuid", "")), dependents=tuple(dependents(si, vm)), vm=vm)
        )
    return sorted(found, key=lambda copy: copy.name)


def delete_retired(copy: RetiredCopy) -> None:
    """Destroy a retired copy that nothing hangs off (the caller checked `dependents`)."""
    if copy.dependents:
        raise ValueError(f"retired copy {copy.name!r} still has linked clones: {', '.join(copy.dependents)}")
    wait_for_task(copy.vm.Destroy_Task(), object_name=copy.name, what="removal of the retired template copy")
