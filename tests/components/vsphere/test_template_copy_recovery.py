"""Which VM of a copy's name a create may adopt (components/vsphere/template_copies/recovery.py,
`refuse_unless_ours`), decided on the VM's marks as vCenter reports them (issue 51 item 9: no test
offered a finished copy whose name mark is this copy's but whose owner mark is another stack's).

The VM is a fake of `chains.read_vm`'s answer (its properties and extraConfig); the simulator tests
(test_vcsim_template_replica.py) run the same function against real clones."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from components.vcenter.errors import VsphereError
from components.vsphere.template_copies import recovery
from components.vsphere.template_copies.chains import MARK, OWNER

NAME = "gold-esxi-003-dev-3f2a"
SOURCE = {"stack": "dev", "source_uuid": "4210-aaaa"}
SNAPSHOT = SimpleNamespace(_moId="snapshot-7")
OURS = recovery.owner_mark(SOURCE, SNAPSHOT)


def _offer(monkeypatch: pytest.MonkeyPatch, *, owner: str | None, template: bool = True, children: list[str] | None = None) -> Any:
    extra = [SimpleNamespace(key=MARK, value=NAME)]
    if owner is not None:
        extra.append(SimpleNamespace(key=OWNER, value=owner))
    answer = {"config.uuid": "4233-bbbb", "config.template": template, "config.extraConfig": extra}
    monkeypatch.setattr(recovery, "read_vm", lambda si, vm: answer)
    monkeypatch.setattr(recovery, "dependents", lambda si, vm: list(children or []))
    return recovery.refuse_unless_ours(object(), object(), NAME, OURS, set())


def test_a_finished_copy_of_this_name_and_owner_is_adopted(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _offer(monkeypatch, owner=OURS) is True


@pytest.mark.parametrize(
    "owner",
    [
        recovery.owner_mark({**SOURCE, "stack": "staging"}, SNAPSHOT),  # another stack, same template
        recovery.owner_mark({**SOURCE, "source_uuid": "4210-cccc"}, SNAPSHOT),  # another source
        recovery.owner_mark(SOURCE, SimpleNamespace(_moId="snapshot-9")),  # another snapshot of it
        None,  # a finished copy must carry the owner mark (written in the clone spec)
    ],
)
def test_a_finished_copy_with_our_name_mark_but_another_owner_is_refused(
    monkeypatch: pytest.MonkeyPatch, owner: str | None
) -> None:
    with pytest.raises(VsphereError, match="already exists and is not this copy's: its owner mark") as refused:
        _offer(monkeypatch, owner=owner)
    assert f"{OWNER}={owner!r}" in str(refused.value) and "Never `pulumi import` it" in str(refused.value)


def test_a_half_made_copy_without_an_owner_mark_yet_is_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cloned, not yet a template (the owner mark may not have landed): finished, not adopted."""
    assert _offer(monkeypatch, owner=None, template=False) is False


def test_a_finished_copy_that_vms_hang_off_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(VsphereError, match=r"VMs are cloned from it \(worker-1\)"):
        _offer(monkeypatch, owner=OURS, children=["worker-1"])
