"""How big a stack's state is, per resource type: the state the engine would keep for our plan.

No published `pulumi stack export` of a pulumi-vsphere stack could be found (searched pulumi and
pulumi-vsphere issues), so the size is *measured on our own plan*: each resource the program
registers under the mock runtime becomes the entry the engine stores for it (apitype `ResourceV3`:
urn, custom, id, type, inputs, outputs, parent, provider, dependencies, propertyDependencies,
created/modified times, sourcePosition), with the mock's outputs (inputs plus the computed values
`stacks/tools/plan/mock_values.py` gives) and every secret as the engine writes it (a ciphertext object,
`{"4dabf1...": "1b4706...", "ciphertext": ...}`, about 4/3 of the plaintext plus the AES-GCM nonce
and tag). Dynamic resources carry their pickled provider (`__provider`) in inputs and outputs,
exactly as the SDK stores it. This is a lower bound for typed vSphere resources: a real
`VirtualMachine`'s outputs carry every computed property of the provider's schema, not only what
the mock returns. For comparison, published whole-state sizes per resource: 569,305 bytes for
about 236 resources (pulumi/pulumi#6197, AWS, ~2.4 KB each) and 85 MB for ~30,000 (pulumi/pulumi#24408,
~2.8 KB each).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from pulumi.runtime import rpc

from stacks.tools.plan.mock_runtime import unwrap
from stacks.tools.plan.mock_values import fake_outputs, fake_resource_id

SECRET_SIG = "4dabf18193072939515e22adb298388d"
SECRET_VALUE = "1b47061264138c4ac30d75fd1eb44270"
_GCM_OVERHEAD = 12 + 16
"""Nonce and tag of the passphrase/cloud secrets managers' AES-256-GCM."""
_TIMESTAMP = "2026-11-26T14:00:00.000000000Z"


def as_stored(value: Any) -> Any:
    """A value as the state file holds it: secrets encrypted, the rest as it is."""
    if rpc.is_rpc_secret(value):
        plaintext = json.dumps(unwrap(value), default=str)
        cipher_chars = 4 * ((len(plaintext) + _GCM_OVERHEAD + 2) // 3) + len("v1:") + 16
        return {SECRET_SIG: SECRET_VALUE, "ciphertext": "x" * cipher_chars}
    if isinstance(value, dict):
        return {k: as_stored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_stored(v) for v in value]
    return value


def state_entry(resource: Any) -> dict[str, Any]:
    """The engine's stored entry for one recorded resource (a `RecordedResource`)."""
    inputs = dict(resource.inputs)
    entry: dict[str, Any] = {"urn": resource.urn, "custom": resource.custom, "type": resource.type}
    if resource.custom:
        plain = {k: unwrap(v) for k, v in inputs.items()}
        entry["id"] = fake_resource_id(resource.type, resource.name, plain)
        outputs = {**inputs, **fake_outputs(resource.type, resource.name, plain)}
    else:
        outputs = {}
    entry["inputs"] = as_stored(inputs)
    entry["outputs"] = as_stored(outputs)
    if resource.parent:
        entry["parent"] = resource.parent
    if resource.provider:
        entry["provider"] = resource.provider
    if resource.dependencies:
        entry["dependencies"] = list(resource.dependencies)
    if resource.property_dependencies:
        entry["propertyDependencies"] = dict(resource.property_dependencies)
    entry["created"] = entry["modified"] = _TIMESTAMP
    if resource.source_position:
        entry["sourcePosition"] = resource.source_position
    return entry


def checkpoint(entries: list[dict[str, Any]], stack: str = "organization/vsphere-gpu-cluster/w") -> dict[str, Any]:
    """A DIY backend's stack file (apitype `VersionedCheckpoint`, version 3)."""
    return {
        "version": 3,
        "checkpoint": {
            "stack": stack,
            "latest": {
                "manifest": {"time": _TIMESTAMP, "magic": "0" * 64, "version": "v3.210.0"},
                "secrets_providers": {"type": "passphrase", "state": {"salt": "v1:" + "x" * 40}},
                "resources": entries,
            },
        },
    }


def entry_bytes(entry: Mapping[str, Any]) -> int:
    """An entry's size in the file: JSON indented by four spaces, nested two levels deep in it."""
    text = json.dumps(entry, indent=4, default=str)
    return len(text.encode()) + 12 * (text.count("\n") + 1)


def bytes_per_type(resources: Iterable[Any]) -> dict[str, int]:
    """Mean stored bytes of one resource of each type (components included)."""
    totals: dict[str, list[int]] = defaultdict(list)
    for resource in resources:
        totals[resource.type].append(entry_bytes(state_entry(resource)))
    return {t: round(sum(sizes) / len(sizes)) for t, sizes in sorted(totals.items())}
