"""The thin vCenter half of `stacks init`: log in, read the inventory preflight reads, log out."""

from __future__ import annotations

from components.vcenter.inventory_model import Inventory
from components.vcenter.settings import VcenterConnection


class ReadFailed(Exception):
    """vCenter could not be reached, refused the login, or failed mid-read: one line for the user."""


def read_estate(conn: VcenterConnection, datacenter: str | None) -> Inventory:
    """The inventory of `datacenter`, or of the only datacenter when None (ReadFailed when several:
    the user names one)."""
    from components.vcenter.faults import fault_text
    from components.vcenter.inventory import read_inventory
    from components.vcenter.session import session

    try:
        with session(conn) as si:
            # Read everywhere first to learn the datacenters (read_inventory does that for a name
            # that does not exist), then inside the chosen one.
            everywhere = read_inventory(si, datacenter or "")
            if datacenter is not None and everywhere.datacenter is None:
                raise ReadFailed(
                    f"--datacenter: no datacenter {datacenter!r} in {conn.address} "
                    f"(datacenters: {', '.join(sorted(everywhere.datacenters)) or 'none'})"
                )
            if datacenter is None:
                if len(everywhere.datacenters) != 1:
                    raise ReadFailed(
                        f"{conn.address} has {len(everywhere.datacenters)} datacenters "
                        f"({', '.join(sorted(everywhere.datacenters)) or 'none'}); name one with --datacenter"
                    )
                return read_inventory(si, next(iter(everywhere.datacenters)))
            return everywhere
    except ReadFailed:
        raise
    except Exception as error:  # unreachable, refused login, a fault mid-read: one line, never a traceback
        raise ReadFailed(f"reading vCenter {conn.address} failed: {fault_text(error)}") from error
