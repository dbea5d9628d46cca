"""Plausible provider answers for runs under the mock runtime.

Only what the program reads back matters here: ids that flow into other resources, and the few
computed outputs (a vmknic's device name inside its id, a VM's UUID) that our own resources take
as inputs. Values are derived from the resource name so that plans are deterministic.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from datetime import datetime, timedelta
from typing import Any

MOCK_VGPU_PROFILES = [f"grid_t4-{size}{kind}" for kind in "cq" for size in (1, 2, 4, 8, 16)]
"""What every mocked host offers; a plan cannot know what a real host offers (preflight does)."""


def _stable_uuid(seed: str) -> str:
    return str(uuid.UUID(hashlib.sha256(seed.encode()).hexdigest()[:32]))


def _moref(prefix: str, seed: str) -> str:
    return f"{prefix}-{int(hashlib.sha256(seed.encode()).hexdigest()[:6], 16)}"


def _fake_pem(label: str, seed: str) -> str:
    """A well-formed PEM block whose body is deterministic filler, not a real key or certificate."""
    body = base64.b64encode(hashlib.sha256(f"{label}:{seed}".encode()).digest() * 4).decode()
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"


def _fake_random_chars(seed: str, length: int) -> str:
    """Lowercase hex: fits any charset with lower+numeric (kubeadm's token alphabet)."""
    chars = ""
    while len(chars) < length:
        seed = hashlib.sha256(seed.encode()).hexdigest()
        chars += seed
    return chars[:length]


def fake_outputs(type_token: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Computed outputs a real provider would return for a freshly created resource."""
    if type_token == "vsphere:index/vnic:Vnic":
        # pulumi-vsphere reports a vmknic's id as "<host moref>_<device>"; the device is what
        # the PVRDMA host settings need.
        return {"mac": "00:50:56:00:00:01"}
    if type_token == "vsphere:index/virtualMachine:VirtualMachine":
        return {
            "uuid": _stable_uuid(name),
            "moid": _moref("vm", name),
            "powerState": "on",
            "defaultIpAddress": "",
        }
    if type_token == "vsphere:index/distributedVirtualSwitch:DistributedVirtualSwitch":
        return {"configVersion": "1"}
    if type_token == "gpucluster:vsphere:TemplateReplica":
        # The copy's BIOS UUID is what the workers' clone takes; shaped like a VM's.
        return {
            "uuid": _stable_uuid(name),
            "vm_name": f"{inputs.get('name')}-0000abcd",
            "snapshot": inputs.get("snapshot_name"),
        }
    # pulumi-tls / pulumi-random: the Kubernetes bootstrap renders these into kubeconfig and
    # user-data, so they must be present and PEM-shaped.
    if type_token == "tls:index/privateKey:PrivateKey":
        return {
            "privateKeyPem": _fake_pem("RSA PRIVATE KEY", name),
            "publicKeyPem": _fake_pem("PUBLIC KEY", name),
        }
    if type_token in (
        "tls:index/selfSignedCert:SelfSignedCert",
        "tls:index/locallySignedCert:LocallySignedCert",
    ):
        return {"certPem": _fake_pem("CERTIFICATE", name)}
    if type_token == "tls:index/certRequest:CertRequest":
        return {"certRequestPem": _fake_pem("CERTIFICATE REQUEST", name)}
    if type_token in (
        "random:index/randomString:RandomString",
        "random:index/randomPassword:RandomPassword",
    ):
        return {"result": _fake_random_chars(name, int(inputs.get("length", 16)))}
    if type_token == "random:index/randomBytes:RandomBytes":
        # The Secrets encryption keys: `length` bytes, as base64 and hex like the provider's.
        raw = bytes.fromhex(_fake_random_chars(name, 2 * int(inputs.get("length", 32))))
        return {"base64": base64.b64encode(raw).decode(), "hex": raw.hex()}
    if type_token == "gpucluster:kubernetes:JoinTokenRotation":
        # A fixed issue time keeps plans deterministic (the real one reads the clock).
        return join_token_window(MOCK_JOIN_TOKEN_ISSUED_AT, float(inputs.get("ttl_hours", 0)))
    return {}


MOCK_JOIN_TOKEN_ISSUED_AT = "2026-01-01T00:00:00Z"


def join_token_window(issued_at: str, ttl_hours: float) -> dict[str, str]:
    expires = datetime.fromisoformat(issued_at.replace("Z", "+00:00")) + timedelta(hours=ttl_hours)
    return {"issued_at": issued_at, "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}


def fake_resource_id(type_token: str, name: str, inputs: dict[str, Any]) -> str:
    """The id a real provider would assign; shaped like the real one where code parses it."""
    if type_token == "vsphere:index/vnic:Vnic":
        return f"{inputs.get('host', 'host-0')}_vmk1"
    if type_token == "vsphere:index/virtualMachine:VirtualMachine":
        return _stable_uuid(name)
    if type_token == "vsphere:index/distributedVirtualSwitch:DistributedVirtualSwitch":
        return _stable_uuid(name).replace("-", " ")
    return f"{name}-id"


def fake_invoke_result(token: str, args: dict[str, Any]) -> dict[str, Any]:
    """Answers for the provider functions (data sources) the program calls."""
    name = str(args.get("name", ""))
    if token == "vsphere:index/getDatacenter:getDatacenter":
        return {"id": _moref("datacenter", name), "name": name}
    if token == "vsphere:index/getComputeCluster:getComputeCluster":
        return {"id": _moref("domain-c", name), "name": name, "resourcePoolId": _moref("resgroup", name)}
    if token == "vsphere:index/getResourcePool:getResourcePool":
        return {"id": _moref("resgroup", name), "name": name}
    if token == "vsphere:index/getDatastore:getDatastore":
        return {"id": _moref("datastore", name), "name": name, "stats": {}}
    if token == "vsphere:index/getHost:getHost":
        return {"id": _moref("host", name), "name": name, "resourcePoolId": _moref("resgroup", name)}
    if token == "vsphere:index/getNetwork:getNetwork":
        return {"id": _moref("network", name), "name": name, "type": "Network"}
    if token == "vsphere:index/getFolder:getFolder":
        return {"id": _moref("group-v", str(args.get("path", ""))), "path": args.get("path")}
    if token == "vsphere:index/getVirtualMachine:getVirtualMachine":
        return {
            "id": _stable_uuid(name),
            "name": name,
            "guestId": "rhel9_64Guest",
            "firmware": "efi",
            "hardwareVersion": 19,
            "scsiType": "pvscsi",
            "scsiBusSharing": "noSharing",
            "scsiControllerScanCount": 1,
            "networkInterfaceTypes": ["vmxnet3"],
            "disks": [{"label": "disk0", "size": 40, "eagerlyScrub": False, "thinProvisioned": True, "unitNumber": 0}],
        }
    if token == "vsphere:index/getHostVgpuProfile:getHostVgpuProfile":
        return {
            "id": args.get("hostId", ""),
            "hostId": args.get("hostId", ""),
            "vgpuProfiles": [
                {
                    "vgpu": profile,
                    "diskSnapshotSupported": False,
                    "memorySnapshotSupported": False,
                    "migrateSupported": True,
                    "suspendSupported": False,
                }
                for profile in MOCK_VGPU_PROFILES
            ],
        }
    return {"id": f"{token}-result"}
