"""DvsHostMember's diff: which changes replace the membership, and which are refused.

Another host is another vmnic: the new membership can come first and the old one goes after
whatever used it. Another switch is refused: the host's vmknic and its VMs' ports use the old
switch, and the engine would not delete them first (see the comment in
`DvsHostMemberProvider.diff`), so vCenter would refuse the removal with ResourceInUse halfway
through an update.
"""

from __future__ import annotations

from typing import Any

import pytest
from pulumi.runtime import rpc

from components.vsphere.dvs_host_member import DvsHostMemberProvider

OLD: dict[str, Any] = {"host_name": "esx-1", "switch_uuid": "50 11", "vmnics": ["vmnic4"]}


@pytest.mark.parametrize(
    ("change", "replaces"),
    [
        ({}, []),
        ({"vmnics": ["vmnic5"]}, []),
        ({"host_name": "esx-2"}, ["host_name"]),
    ],
    ids=["same", "other-vmnic", "other-host"],
)
def test_diff_replaces_a_membership_of_another_host_create_first(change: dict[str, Any], replaces: list[str]) -> None:
    diff = DvsHostMemberProvider().diff("50 11:esx-1", OLD, {**OLD, **change})

    assert diff.replaces == replaces
    assert diff.changes is bool(change)
    assert diff.delete_before_replace is False


@pytest.mark.parametrize(
    ("change", "host"),
    [
        ({"switch_uuid": "50 22"}, "esx-1"),
        ({"host_name": "esx-2", "switch_uuid": "50 22"}, "esx-1"),
        # A switch being replaced: its new id is unknown during the preview.
        ({"switch_uuid": rpc.UNKNOWN}, "esx-1"),
    ],
    ids=["other-switch", "other-host-and-switch", "switch-unknown"],
)
def test_diff_refuses_to_move_a_host_to_another_switch(change: dict[str, Any], host: str) -> None:
    with pytest.raises(ValueError, match="moving host") as raised:
        DvsHostMemberProvider().diff("50 11:esx-1", OLD, {**OLD, **change})

    message = str(raised.value)
    assert f"host {host}" in message
    assert "impossible" in message and "vmknic" in message and "use the old switch" in message
    assert "remove the host" in message and "pulumi up" in message and "add it back" in message


def test_a_replaced_switch_says_every_host_and_worker_must_go() -> None:
    """The switch itself replaced (a setting that replaces it, so its id is unknown in the preview):
    not one host moving but every member, so the message must not read as if one host could move."""
    with pytest.raises(ValueError) as raised:
        DvsHostMemberProvider().diff("50 11:esx-1", OLD, {**OLD, "switch_uuid": rpc.UNKNOWN})

    message = str(raised.value)
    assert "switch itself is being replaced" in message
    assert "every host" in message and "every GPU worker" in message
    assert "vcenter.datacenter" in message and "gpuWorkers.nodes" in message
