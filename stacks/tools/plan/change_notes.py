"""What a changed stack-file key does *not* do to running nodes, for `plan --against`.

Some keys feed no resource input of an existing node, so the plan shows every node `unchanged` and
a reader is left to guess whether the change took. These notes say so, and what would make it take.
(`kubernetes.version` has its own notes in `upgrade_notes`.)
"""

from __future__ import annotations

from stacks.environment.model import Environment


def config_notes(before: Environment, after: Environment) -> list[str]:
    notes = []
    old, new = before.vcenter.template_snapshot, after.vcenter.template_snapshot
    if old != new:
        # pulumi-vsphere clones from the template's *current* snapshot and takes no snapshot name
        # (terraform-provider-vsphere, vsphere/internal/vmworkflow/virtual_machine_clone_subresource.go:
        # ExpandVirtualMachineCloneSpec sets `spec.Snapshot = vprops.Snapshot.CurrentSnapshot`, and
        # validateCloneSnapshots requires exactly one snapshot). The key only tells preflight which
        # snapshot that one must be.
        notes.append(
            f"vcenter.templateSnapshot {old!r} -> {new!r}: replaces no node and changes nothing on existing ones; "
            "linked clones always hang off the template's current snapshot (its only one), and this key only names "
            "the snapshot preflight expects. Nodes added or replaced later clone from whatever snapshot the template "
            "has then; to move running nodes onto a rebuilt template, change vcenter.template (or gpuTemplate), "
            "which rolls them"
        )
    return notes
