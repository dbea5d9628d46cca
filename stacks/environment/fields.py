"""Field types of the environment: the format and limits of one value, each with the fix in its
message. `model` builds the environment's sections from them; rules across fields live in `rules*`.
"""

from __future__ import annotations

import re
from ipaddress import IPv4Address, IPv4Network
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from components.k8s.facts import DNS_LABEL, DNS_SUBDOMAIN, SUPPORTED_KUBERNETES_MINORS
from components.k8s.version_policy import unsupported_message

# NVIDIA vGPU type names as vSphere lists them: grid_<board>-<framebuffer GB><series>, with an
# optional MIG slice count for A100/H100-class boards (grid_a100-3-20c). Series: A (app streaming),
# B (virtual PC), C (compute: what training needs), Q (workstation).
# Boards released since vGPU 17 are listed with an `nvidia_` prefix instead (nvidia_l40s-48q,
# nvidia_a40-48c, nvidia_h100-1-10c).
_VGPU_PROFILE = re.compile(r"^(grid|nvidia)_(?P<board>[a-z0-9]+)(-[0-9]+)?-[0-9]+(?P<series>[abcq])$")
_K8S_VERSION = re.compile(r"^1\.(\d+)\.(\d+)$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$")
# ESXi aliases physical NICs vmnicN, N an integer counted from 0 upwards (Broadcom KB 324534, "How
# VMware ESXi determines the order in which names are assigned to devices"): no leading zeros.
_VMNIC = re.compile(r"^vmnic(0|[1-9][0-9]*)$")
_VMNIC_PADDED = re.compile(r"^vmnic0+(?P<n>[0-9]+)$")
_VMKNIC = re.compile(r"^vmk[0-9]+$")
_PCI_ID = re.compile(r"^[0-9a-f]{4}$")
# The RDMA shared device plugin accepts letters, digits and '_' in a resource name
# (components/k8s/addons/rdma_plugin.py, after the plugin's own check).
_RDMA_RESOURCE_NAME = re.compile(r"^[a-zA-Z0-9_]+$")
# OpenSSH public key types cloud-init writes to authorized_keys (sshd(8), AUTHORIZED_KEYS FILE FORMAT).
SSH_KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-", "sk-ssh-ed25519", "sk-ecdsa-sha2-")

DVS_VERSIONS = ("6.5.0", "6.6.0", "7.0.0", "7.0.2", "7.0.3", "8.0.0", "8.0.3", "9.0.0")
"""Distributed switch versions vCenter creates (`DistributedVirtualSwitchProductSpec.version`)
that can carry PVRDMA: PVRDMA arrived with vSphere 6.5, so older switches cannot."""

HARDWARE_VERSIONS = (13, 14, 15, 17, 18, 19, 20, 21, 22)
"""ESXi virtual hardware versions from 13 (ESXi 6.5, the first with PVRDMA) to 22 (ESXi 9.0);
16 exists only in Workstation/Fusion (VMware KB 1003746, "Virtual machine hardware versions")."""

MIN_CLONE_TIMEOUT_MINUTES = 10
"""terraform-provider-vsphere refuses a `clone.timeout` under 10 minutes
(virtual_machine_clone_subresource.go: `validation.IntAtLeast(10)`)."""


def _dns_label(value: str) -> str:
    if not DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid name: use lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return value


def _vgpu_profile(value: str) -> str:
    if not _VGPU_PROFILE.match(value):
        raise ValueError(
            f"{value!r} is not an NVIDIA vGPU profile name; expected the form vSphere lists, "
            "e.g. grid_t4-16c, grid_a100-3-20c or nvidia_l40s-48c (lowercase, 'grid_' or 'nvidia_' prefix)"
        )
    return value


def vgpu_board_and_series(profile: str) -> tuple[str, str]:
    """`('t4', 'c')` for `grid_t4-16c`: the board and the series letter of a well-formed profile."""
    match = _VGPU_PROFILE.match(profile)
    if not match:
        raise ValueError(f"{profile!r} is not a vGPU profile name")
    return match["board"], match["series"]


def _dns_subdomain(value: str) -> str:
    if not DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f"{value!r} is not a valid DNS name: lowercase letters, digits and '-' in dot-separated labels "
            "(no '_', no spaces), at most 253 characters"
        )
    return value


def _host_or_ip(value: str) -> str:
    """A bare host name or IPv4 address: kubeadm's `controlPlaneEndpoint` takes `host[:port]`, and the
    port is always 6443 here."""
    if "://" in value or "/" in value or ":" in value:
        raise ValueError(
            f"{value!r} must be a bare DNS name or IP address, without scheme, port or path "
            "(e.g. k8s-api.lab.example.com); the API server port is 6443"
        )
    try:
        IPv4Address(value)
    except ValueError:
        _dns_subdomain(value)
    return value


def _vmnic(value: str) -> str:
    if _VMNIC.match(value):
        return value
    where = "as listed under Host > Configure > Physical adapters"
    padded = _VMNIC_PADDED.match(value)
    digits = re.search(r"[0-9]+$", value)
    # eth4 is likely vmnic4's port; a vmk's number says nothing of its uplink.
    example = f"vmnic{int(digits.group())}" if digits and not _VMKNIC.match(value) else "vmnic4"
    if padded:
        why = f"ESXi names physical NICs vmnicN without leading zeros: write vmnic{int(padded['n'])} ({where})"
    elif _VMKNIC.match(value):
        why = f"{value} is a VMkernel adapter, not a physical NIC; RDMA uplinks are vmnics (e.g. {example}, {where})"
    else:
        why = f"RDMA uplinks are ESXi's physical NIC names, vmnicN (e.g. {example}, {where})"
        if re.match(r"^(eth|en[a-z]|ib)", value):
            why = f"{value} is a Linux interface name; {why}"
    raise ValueError(f"{value!r} is not a physical NIC name; {why}")


def _pci_id(value: str) -> str:
    if not _PCI_ID.match(value):
        raise ValueError(f"{value!r} is not a PCI id: 4 lowercase hex digits without 0x, e.g. 15ad")
    return value


def _rdma_resource_name(value: str) -> str:
    if not _RDMA_RESOURCE_NAME.match(value):
        raise ValueError(
            f"{value!r} is not a resource name the RDMA shared device plugin accepts: letters, digits and '_' only"
        )
    return value


def _ssh_public_key(value: str) -> str:
    if "PRIVATE KEY" in value:
        raise ValueError(
            "this is a private key; give the public key (the one line of the .pub file, e.g. ssh-ed25519 AAAA...)"
        )
    if not value.startswith(SSH_KEY_TYPES) or "\n" in value.strip():
        raise ValueError(
            f"not an OpenSSH public key line (starts with {value[:12]!r}); give one line of a .pub file, "
            f"starting with one of {', '.join(SSH_KEY_TYPES)}"
        )
    return value


def _written_as_text(value: Any) -> Any:
    """Addresses and ranges as text only: pydantic would read `12` or `true` as 0.0.0.12 or 0.0.0.1."""
    if not isinstance(value, str | IPv4Address | IPv4Network):
        raise ValueError(f"{value!r} is not an address; write it like 10.10.0.5 or, for a range, 10.10.0.0/24")
    return value


def _dvs_version(value: str) -> str:
    if value not in DVS_VERSIONS:
        raise ValueError(
            f"{value!r} is not a distributed switch version that can carry PVRDMA; use one of {', '.join(DVS_VERSIONS)} "
            "(at most the oldest ESXi version of the hosts)"
        )
    return value


def _hardware_version(value: int) -> int:
    if value not in HARDWARE_VERSIONS:
        raise ValueError(
            f"{value} is not an ESXi virtual hardware version that supports PVRDMA; use one of "
            f"{', '.join(map(str, HARDWARE_VERSIONS))} (13+ for PVRDMA, 17+ for PVRDMA namespaces, 16 does not exist on ESXi)"
        )
    return value


def _clone_timeout(value: int) -> int:
    if value < MIN_CLONE_TIMEOUT_MINUTES:
        raise ValueError(
            f"{value} is below the vSphere provider's minimum clone timeout of {MIN_CLONE_TIMEOUT_MINUTES} minutes; "
            f"use {MIN_CLONE_TIMEOUT_MINUTES} or more"
        )
    return value


def _kubernetes_version(value: str) -> str:
    match = _K8S_VERSION.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a Kubernetes version; write it as 1.MINOR.PATCH, e.g. 1.34.2")
    minor = int(match.group(1))
    if minor not in SUPPORTED_KUBERNETES_MINORS:
        raise ValueError(unsupported_message(minor))
    return value


def _pinned_image(value: str) -> str:
    """`[registry[:port]/]path[:tag][@sha256:digest]` with a tag other than latest, or a digest."""
    name, _, digest = value.partition("@")
    last_segment = name.rsplit("/", 1)[-1]
    tag = last_segment.partition(":")[2] if ":" in last_segment else ""
    well_formed = bool(name) and not any(c.isspace() for c in value) and (not digest or _DIGEST.match(digest))
    pinned = bool(digest) or (bool(_TAG.match(tag)) and tag != "latest")
    if not (well_formed and pinned and (not tag or _TAG.match(tag))):
        raise ValueError(f"{value!r} must be pinned to a tag or digest other than 'latest', e.g. repo/image:1.2.3")
    return value


def _quantity(value: str) -> str:
    if not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity; write e.g. 8Gi or 512Mi")
    return value


# Kubernetes label syntax (apimachinery validation `IsQualifiedName`, `IsValidLabelValue`): a name
# of at most 63 characters, alphanumerics with '-', '_', '.' inside, optionally after a DNS
# subdomain prefix and '/'; a value the same name syntax, or empty.
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _label_key(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if not _LABEL_NAME.match(name) or (prefix and not DNS_SUBDOMAIN.match(prefix)):
        raise ValueError(
            f"{value!r} is not a Kubernetes label key: a name of at most 63 letters, digits, '-', '_' or '.' "
            "(starting and ending with a letter or digit), optionally after a DNS prefix and '/'"
        )
    return value


def _label_value(value: str) -> str:
    if value and not _LABEL_NAME.match(value):
        raise ValueError(
            f"{value!r} is not a Kubernetes label value: at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]


def _distinct(values: list[str]) -> list[str]:
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"{', '.join(repeated)} listed more than once; each name must be different")
    return values


DistinctDnsLabels = Annotated[list[DnsLabel], AfterValidator(_distinct)]
VgpuProfile = Annotated[str, AfterValidator(_vgpu_profile)]
KubernetesVersion = Annotated[str, AfterValidator(_kubernetes_version)]
PinnedImage = Annotated[str, AfterValidator(_pinned_image)]
Quantity = Annotated[str, AfterValidator(_quantity)]
NonEmpty = Annotated[str, Field(min_length=1)]
DnsSubdomain = Annotated[str, AfterValidator(_dns_subdomain)]
Address = Annotated[IPv4Address, BeforeValidator(_written_as_text)]
Network = Annotated[IPv4Network, BeforeValidator(_written_as_text)]
HostOrIp = Annotated[str, AfterValidator(_host_or_ip)]
Vmnic = Annotated[str, AfterValidator(_vmnic)]
PciId = Annotated[str, AfterValidator(_pci_id)]
RdmaResourceName = Annotated[str, AfterValidator(_rdma_resource_name)]
SshPublicKey = Annotated[str, AfterValidator(_ssh_public_key)]
DvsVersion = Annotated[str, AfterValidator(_dvs_version)]
HardwareVersion = Annotated[int, AfterValidator(_hardware_version)]
CloneTimeout = Annotated[int, AfterValidator(_clone_timeout)]


def _manifest_url(value: str) -> str:
    # It travels in the node's environment file, which systemd and the shell both read.
    if not re.match(r"^https://[^\s'\"$`\\]+$", value):
        raise ValueError(
            f"{value!r} is not usable: give an https:// URL without spaces, quotes, '$', '`' or '\\', "
            "e.g. https://mirror.example/calico/v3.31.3/tigera-operator.yaml"
        )
    return value


ManifestUrl = Annotated[str, AfterValidator(_manifest_url)]


def _env_name(value: str) -> str:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", value):
        raise ValueError(
            f"{value!r} is not an environment variable name: letters, digits and '_', not starting with a digit"
        )
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]
