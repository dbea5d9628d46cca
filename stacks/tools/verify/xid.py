"""What an XID number means, for `stacks verify`'s GPU health lines.

From NVIDIA's XID catalogue ("Xid Errors", docs.nvidia.com/deploy/xid-errors/, the catalogue for
Ampere and newer, with its description and immediate action per XID). Only the common ones; any
other XID is named with a pointer to the catalogue. `application` marks the XIDs whose cause is
usually the program that ran on the GPU, or that the GPU contained (the catalogue's immediate
action is RESTART_APP, not a GPU reset): they are reported, and do not fail a node.
"""

from __future__ import annotations

from dataclasses import dataclass

CATALOGUE = "https://docs.nvidia.com/deploy/xid-errors/"


@dataclass(frozen=True)
class Xid:
    meaning: str
    restart_app: bool
    """The catalogue's immediate action is RESTART_APP: the GPU itself keeps working."""


XIDS: dict[int, Xid] = {
    8: Xid("GPU stopped processing", restart_app=True),
    13: Xid("Graphics Engine Exception (often an out-of-range access by the program)", restart_app=True),
    31: Xid("GPU memory page fault (an illegal address in the program)", restart_app=True),
    43: Xid("GPU stopped processing (the program's channel was stopped)", restart_app=True),
    45: Xid("Preemptive cleanup, due to previous errors (a program was stopped or killed)", restart_app=True),
    48: Xid("Double Bit ECC Error: reset the GPU", restart_app=False),
    61: Xid("Internal micro-controller breakpoint/warning", restart_app=False),
    62: Xid("Internal micro-controller halt: reset the GPU", restart_app=False),
    63: Xid("ECC page retirement or row remapping recording event: reset the GPU when convenient", restart_app=False),
    64: Xid("ECC page retirement or row remapper recording failure: reset the GPU", restart_app=False),
    74: Xid("NVLink Error", restart_app=False),
    79: Xid("GPU has fallen off the bus: reboot the host", restart_app=False),
    92: Xid("High single-bit ECC error rate", restart_app=False),
    94: Xid("Contained ECC error: restart the affected program", restart_app=True),
    95: Xid("Uncontained ECC error: reset the GPU", restart_app=False),
    119: Xid("GSP RPC timeout: reset the GPU", restart_app=False),
    120: Xid("GSP error: reset the GPU", restart_app=False),
}


def describe(number: int) -> str:
    """`XID 79 (GPU has fallen off the bus: reboot the host)`; an unknown one points at the catalogue."""
    known = XIDS.get(number)
    return f"XID {number} ({known.meaning if known else 'see ' + CATALOGUE})"


def fails_node(number: int) -> bool:
    """Whether an XID seen in the window fails the node: every one but the RESTART_APP ones."""
    known = XIDS.get(number)
    return known is None or not known.restart_app
