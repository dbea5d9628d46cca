"""The thin vCenter half of `stacks init`: log in, read the inventory preflight reads, log out."""

from __future__ import annotations

from components.vcenter.inventory_model import Inventory
from components.vcenter.settings import VcenterConnection


class ReadFailed(Exception):
    """vCenter could not be reached, refused the login, or failed mid-read: one line for the user."""


def read_estate(conn: VcenterConnection, datacenter: str | None) -> Inventory:
    """The inventory of `datacenter`, or of the only datacenter when None (ReadFailed when several:
    the user names one)."""
    from pyVmomi import vim

    from components.vcenter.faults import fault_text
    from components.vcenter.inventory import read_inventory
    from components.vcenter.lookups import collect_properties
    from components.vcenter.session import session

    try:
        with session(conn) as si:
            # The datacenters' names first (one small round), then the inventory of the chosen one.
            root = si.RetrieveContent().rootFolder
            names = sorted(props["name"] for _, props in collect_properties(si, root, vim.Datacenter, ["name"]))
            listed = ", ".join(names) or "none"
            if datacenter is not None and datacenter not in names:
                raise ReadFailed(
                    f"--datacenter: no datacenter {datacenter!r} in {conn.address} (datacenters: {listed})"
                )
            if datacenter is None and len(names) != 1:
                raise ReadFailed(f"{conn.address} has {len(names)} datacenters ({listed}); name one with --datacenter")
            return read_inventory(si, datacenter or names[0])
    except ReadFailed:
        raise
    except Exception as error:  # unreachable, refused login, a fault mid-read: one line, never a traceback
        raise ReadFailed(f"reading vCenter {conn.address} failed: {fault_text(error)}") from error
