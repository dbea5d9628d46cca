"""The stack's side of the init node's key handoff, for the node harness: what `InitPkiDelivery`
(components/vsphere/pki_delivery.py) does when it finds the node's request in guestinfo, with the
same sealing code (`key_handoff.seal_bundle`) and the stack's signing key the test gave it. The
stand-in vmware-rpctool runs it when the node asks for the envelope and the test made the stack
deliver (`Node.stack_delivers_pki`).

    python -m tests.components.k8s.node_bootstrap.pki_responder SIM_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from components.vsphere.key_handoff import ENVELOPE_KEY, REQUEST_KEY, seal_bundle


def respond(sim: Path) -> None:
    guestinfo = sim / "guestinfo"
    request = (guestinfo / REQUEST_KEY).read_text()
    bundle, signing_key = (sim / "pki-bundle").read_bytes(), (sim / "pki-signing-key").read_text()
    (guestinfo / ENVELOPE_KEY).write_text(seal_bundle(bundle, request, signing_key))
    with (sim / "deliveries").open("a") as log:
        log.write("delivered\n")


if __name__ == "__main__":
    respond(Path(sys.argv[1]))
