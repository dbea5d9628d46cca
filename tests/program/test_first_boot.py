"""First-boot data, without Pulumi: static MACs and the cloud-init metadata the guest reads."""

from __future__ import annotations

import base64
import json
import re
from ipaddress import IPv4Address, IPv4Network

import pytest

from components.vsphere.first_boot import NicAddress, guestinfo_extra_config, metadata_document, static_mac

_MAC = re.compile(r"^00:50:56:[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$")


def _in_vmware_static_range(mac: str) -> bool:
    """VMware leaves 00:50:56:00:00:00-00:50:56:3f:ff:ff for manually assigned MACs."""
    return bool(_MAC.match(mac)) and int(mac.split(":")[3], 16) <= 0x3F


@pytest.mark.parametrize(
    "address",
    ["0.0.0.0", "10.10.0.51", "192.168.0.54", "172.31.255.254", "255.255.255.255", "100.64.12.7"],
)
@pytest.mark.parametrize("role", ["management", "rdma"])
def test_static_mac_is_in_vmwares_manual_range(address: str, role: str) -> None:
    mac = static_mac(IPv4Address(address), role)  # type: ignore[arg-type]
    assert _in_vmware_static_range(mac), mac


def test_static_mac_is_deterministic() -> None:
    assert static_mac(IPv4Address("10.10.0.51"), "management") == static_mac(IPv4Address("10.10.0.51"), "management")
    assert static_mac(IPv4Address("10.10.0.51"), "management") == "00:50:56:0a:00:33"


def test_the_two_nics_of_one_address_never_share_a_mac() -> None:
    for address in IPv4Network("192.168.0.0/24"):
        assert static_mac(address, "management") != static_mac(address, "rdma")


@pytest.mark.parametrize("subnet", ["10.10.0.0/24", "192.168.0.0/16", "10.32.0.0/11"])
def test_every_address_of_a_subnet_gets_its_own_mac(subnet: str) -> None:
    network = IPv4Network(subnet)
    for role in ("management", "rdma"):
        macs = {static_mac(address, role) for address in network}  # type: ignore[arg-type]
        assert len(macs) == network.num_addresses


def test_management_and_rdma_macs_of_a_real_layout_are_all_distinct() -> None:
    # dev: management 10.10.0.50-54, RDMA 192.168.0.51-54: 9 NICs, 9 MACs.
    management = [static_mac(IPv4Address(f"10.10.0.{i}"), "management") for i in range(50, 55)]
    rdma = [static_mac(IPv4Address(f"192.168.0.{i}"), "rdma") for i in range(51, 55)]
    assert len(set(management + rdma)) == 9


def _nics() -> list[NicAddress]:
    return [
        NicAddress(
            role="management",
            address=IPv4Address("10.10.0.51"),
            network=IPv4Network("10.10.0.0/24"),
            gateway=IPv4Address("10.10.0.1"),
        ),
        NicAddress(role="rdma", address=IPv4Address("192.168.0.51"), network=IPv4Network("192.168.0.0/24"), mtu=9000),
    ]


def test_metadata_document_shape() -> None:
    nics = _nics()
    document = json.loads(
        metadata_document(
            instance_id="dev-gpu-worker-1",
            hostname="worker-1",
            nics=nics,
            dns_servers=[IPv4Address("10.10.0.2"), IPv4Address("10.10.0.3")],
            dns_domain="lab.example.com",
        )
    )
    assert document == {
        # The VM's bootstrap asks for its keys (InitPkiDelivery tells older VMs apart by this).
        "gpucluster-key-handoff": "v1",
        "instance-id": "dev-gpu-worker-1",
        "local-hostname": "worker-1",
        "network": {
            "version": 2,
            "ethernets": {
                "mgmt0": {
                    "match": {"macaddress": nics[0].mac},
                    "set-name": "mgmt0",
                    "dhcp4": False,
                    "addresses": ["10.10.0.51/24"],
                    "routes": [{"to": "default", "via": "10.10.0.1"}],
                    "nameservers": {"addresses": ["10.10.0.2", "10.10.0.3"], "search": ["lab.example.com"]},
                },
                "rdma0": {
                    "match": {"macaddress": nics[1].mac},
                    "set-name": "rdma0",
                    "dhcp4": False,
                    "addresses": ["192.168.0.51/24"],
                    "mtu": 9000,
                },
            },
        },
        "redact": ["userdata", "vendordata"],
    }


def test_metadata_document_is_stable_text() -> None:
    def render() -> str:
        return metadata_document(
            instance_id="i", hostname="h", nics=_nics(), dns_servers=[IPv4Address("10.10.0.2")], dns_domain="d"
        )

    # Byte-identical between runs, or every `pulumi up` would see a changed extraConfig.
    assert render() == render()


def test_guestinfo_keys_round_trip_through_base64() -> None:
    user_data = "#cloud-config\nruncmd:\n  - [kubeadm, join]\n"
    extra = guestinfo_extra_config('{"local-hostname": "worker-1"}', user_data)
    assert extra["guestinfo.metadata.encoding"] == extra["guestinfo.userdata.encoding"] == "base64"
    assert json.loads(base64.b64decode(extra["guestinfo.metadata"])) == {"local-hostname": "worker-1"}
    assert base64.b64decode(extra["guestinfo.userdata"]).decode() == user_data
