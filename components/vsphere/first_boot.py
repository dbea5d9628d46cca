"""First-boot data for the node VMs: cloud-init through the VMware datasource's guestinfo keys.

Why guestinfo rather than vSphere guest customization: customization specs configure hostname and
NICs but cannot carry the kubeadm payload, and the cloud-init customization type needs vSphere
7.0 U3 and leaves its data in the customization spec. cloud-init's VMware datasource (cloud-init
21.3+, in every supported template OS) reads `guestinfo.metadata` (hostname, static network) and
`guestinfo.userdata` (the bootstrap) from the VM's extraConfig, and the metadata key `redact` makes
it blank the user-data key right after reading. That blanks the guest's view only: vCenter's copy
(the VM's extraConfig, its .vmx) keeps the tokens until `GuestinfoScrub` (`guestinfo_scrub`)
removes them once the guest has read them. No key is in it: the init node's arrive sealed
(`pki_delivery`).

NICs are matched by MAC address, which we set statically: interface names inside the guest
depend on PCI slot numbering and the PVRDMA NIC's ethernet function uses the vmxnet3 driver too,
so neither names nor drivers tell the two NICs apart. The MACs are derived from the NIC's address
(pure function, stable across runs) inside VMware's range for manually assigned MACs.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from typing import Literal

from components.vsphere.key_handoff import HANDOFF_KEYS

NicRole = Literal["management", "rdma"]
KEY_HANDOFF_METADATA = "gpucluster-key-handoff"
KEY_HANDOFF_VERSION = "v1"

# VMware reserves 00:50:56:00:00:00-00:50:56:3F:FF:FF for statically assigned MACs: 22 free bits.
_ROLE_BIT = {"management": 0, "rdma": 1 << 21}


def static_mac(address: IPv4Address, role: NicRole) -> str:
    """A MAC in VMware's static range, unique for every address within any /11 and per role."""
    value = _ROLE_BIT[role] | (int(address) & ((1 << 21) - 1))
    return f"00:50:56:{(value >> 16) & 0x3F:02x}:{(value >> 8) & 0xFF:02x}:{value & 0xFF:02x}"


@dataclass(frozen=True, kw_only=True)
class NicAddress:
    role: NicRole
    address: IPv4Address
    network: IPv4Network
    gateway: IPv4Address | None = None
    mtu: int | None = None

    @property
    def mac(self) -> str:
        return static_mac(self.address, self.role)


def metadata_document(
    *,
    instance_id: str,
    hostname: str,
    nics: list[NicAddress],
    dns_servers: list[IPv4Address],
    dns_domain: str,
) -> str:
    """cloud-init metadata (JSON) for the VMware datasource: hostname and static network config."""
    ethernets: dict[str, dict[str, object]] = {}
    for nic in nics:
        entry: dict[str, object] = {
            "match": {"macaddress": nic.mac},
            "set-name": "mgmt0" if nic.role == "management" else "rdma0",
            "dhcp4": False,
            "addresses": [f"{nic.address}/{nic.network.prefixlen}"],
        }
        if nic.mtu is not None:
            entry["mtu"] = nic.mtu
        if nic.gateway is not None:
            entry["routes"] = [{"to": "default", "via": str(nic.gateway)}]
        if nic.role == "management":
            entry["nameservers"] = {"addresses": [str(d) for d in dns_servers], "search": [dns_domain]}
        ethernets["mgmt0" if nic.role == "management" else "rdma0"] = entry
    document = {
        "instance-id": instance_id,
        "local-hostname": hostname,
        "network": {"version": 2, "ethernets": ethernets},
        # Blank the guest's guestinfo.userdata once read: it carries the bootstrap token and keys
        # (vCenter's copy goes with GuestinfoScrub, once the guest read it).
        "redact": ["userdata", "vendordata"],
        # This VM's bootstrap asks for its keys (node_bootstrap/pki_handoff.py). A VM made by an
        # earlier version got them in its user-data and keeps its metadata (the VM ignores changes
        # to these keys): InitPkiDelivery tells the two apart by this.
        KEY_HANDOFF_METADATA: KEY_HANDOFF_VERSION,
    }
    return json.dumps(document, sort_keys=True)


def asks_for_its_keys(encoded_metadata: str | None) -> bool:
    """Whether a VM's `guestinfo.metadata` (base64, as `guestinfo_extra_config` writes it) says
    its bootstrap asks for its keys."""
    if not encoded_metadata:
        return False
    try:
        document = json.loads(base64.b64decode(encoded_metadata))
    except ValueError:
        return False
    return isinstance(document, dict) and document.get(KEY_HANDOFF_METADATA) == KEY_HANDOFF_VERSION


GUESTINFO_KEYS = (
    "guestinfo.metadata",
    "guestinfo.metadata.encoding",
    "guestinfo.userdata",
    "guestinfo.userdata.encoding",
    *HANDOFF_KEYS,
)
"""The extraConfig keys of `guestinfo_extra_config`."""


def guestinfo_extra_config(metadata: str, user_data: str) -> dict[str, str]:
    """The extraConfig entries the datasource reads (base64, so YAML survives the VMX format), and
    the init node's key hand-off keys blank.

    Blank removes a key (vSphere's OptionValue semantics, which terraform-provider-vsphere relies
    on to remove a key: virtual_machine_config_structure.go, `expandExtraConfig`), and the clone's
    extraConfig is applied before the VM powers on. So a request, envelope or answer a template
    or an earlier VM left behind is gone before the node's bootstrap starts: the first request
    the delivery sees is this VM's, and a stale answer cannot pass for this VM's (issue 53 item 1).
    """
    return {
        "guestinfo.metadata": base64.b64encode(metadata.encode()).decode(),
        "guestinfo.metadata.encoding": "base64",
        "guestinfo.userdata": base64.b64encode(user_data.encode()).decode(),
        "guestinfo.userdata.encoding": "base64",
        **dict.fromkeys(HANDOFF_KEYS, ""),
    }
