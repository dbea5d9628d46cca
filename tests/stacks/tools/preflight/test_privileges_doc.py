"""docs/deploy.md shows the role the stack's account needs: the same table preflight checks."""

from __future__ import annotations

from pathlib import Path

from stacks.tools.preflight.checks.privileges import ROLE, role_table

ROOT = Path(__file__).resolve().parents[4]


def test_the_documented_role_is_the_one_preflight_checks() -> None:
    text = (ROOT / "docs" / "deploy.md").read_text()
    start = text.index("<!-- role-table:")
    end = text.index("<!-- /role-table -->")
    documented = text[start:end].splitlines()[1:]
    assert [line for line in documented if line.strip()] == role_table()


def test_the_template_copies_need_what_issue_32_names() -> None:
    copies = {need.privilege for need in ROLE if need.feature.startswith("template copies")}
    assert {
        "VirtualMachine.Provisioning.Clone",
        "VirtualMachine.Inventory.CreateFromExisting",
        "VirtualMachine.State.CreateSnapshot",
        "VirtualMachine.Provisioning.MarkAsTemplate",
        "VirtualMachine.Config.Rename",
        "VirtualMachine.Inventory.Delete",
        "Datastore.AllocateSpace",
        "Resource.AssignVMToPool",
    } <= copies
