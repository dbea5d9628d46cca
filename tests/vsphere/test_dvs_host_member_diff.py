"""DvsHostMember's diff: which changes replace the membership, and in which order.

A vmnic backs the uplinks of one switch only (each physical adapter is paired with one uplink
port of one switch; see the comment in `DvsHostMemberProvider.diff`), so moving a host's RDMA
vmnic to another switch has to take it off the old switch before the new membership can claim
it: delete first. Another host is another vmnic: the new membership can come first and the old
one goes after whatever used it.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.vsphere.dvs_host_member import DvsHostMemberProvider

OLD: dict[str, Any] = {"host_name": "esx-1", "switch_uuid": "50 11", "vmnics": ["vmnic4"]}


@pytest.mark.parametrize(
    ("change", "replaces", "delete_first"),
    [
        ({}, [], False),
        ({"vmnics": ["vmnic5"]}, [], False),
        ({"host_name": "esx-2"}, ["host_name"], False),
        ({"switch_uuid": "50 22"}, ["switch_uuid"], True),
        ({"host_name": "esx-2", "switch_uuid": "50 22"}, ["host_name", "switch_uuid"], True),
    ],
    ids=["same", "other-vmnic", "other-host", "other-switch", "other-host-and-switch"],
)
def test_diff_replaces_a_membership_of_another_switch_delete_first(
    change: dict[str, Any], replaces: list[str], delete_first: bool
) -> None:
    diff = DvsHostMemberProvider().diff("50 11:esx-1", OLD, {**OLD, **change})

    assert diff.replaces == replaces
    assert diff.changes is bool(change)
    assert diff.delete_before_replace is delete_first
