"""The stack file `stacks init` writes from its `Choices` (pure: text in, text out).

Every value read from vCenter carries a comment saying why it was chosen (which vmnic and why,
which profile fills each host's GPUs, which datastore); every value only a person can decide
carries `DECIDE:` (the addresses, the control plane's size, the Kubernetes version), with a
placeholder that validates, so `validate` and `plan` run on the file as written. The addresses are
from the documentation ranges of RFC 5737 (192.0.2.0/24, 198.51.100.0/24): they route nowhere, so a
file nobody edited cannot reach a real network.
"""

from __future__ import annotations

import json
import re
from ipaddress import IPv4Address, IPv4Network

from components.k8s.facts import SUPPORTED_KUBERNETES_MINORS
from stacks.environment.model import KubernetesSettings
from stacks.tools.init.estate import Choices, TemplateChoice
from stacks.tools.preflight.checks.report import version_tuple

MANAGEMENT_SUBNET = IPv4Network("192.0.2.0/24")
RDMA_SUBNET = IPv4Network("198.51.100.0/24")
CONTROL_PLANE_NODES = 3
"""Three: etcd keeps quorum with one node down (docs/availability.md); one is the smaller choice."""
MAX_HOSTS = 80
"""Placeholder addresses: vmknics from .10, workers from .100 of one /24 (more hosts: other subnets)."""
WORKER_VCPUS = 16
WORKER_MEMORY_CAP_MB = 256 * 1024


_PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9 ._/-]*[A-Za-z0-9]$")
_YAML_WORDS = {"yes", "no", "on", "off", "true", "false", "null", "y", "n"}


def _scalar(value: str) -> str:
    """A name read from vCenter as a YAML scalar: plain when YAML reads it back as the same string,
    else double-quoted (JSON's escaping is valid YAML): `GPU Cluster #1` or `2024` stay strings."""
    if _PLAIN.match(value) and value.lower() not in _YAML_WORDS and ": " not in value:
        return value
    return json.dumps(value)


def _address(subnet: IPv4Network, offset: int) -> IPv4Address:
    return subnet.network_address + offset


def worker_memory_mb(choices: Choices) -> int:
    """Half the smallest host's memory (the worker reserves all of it: vGPU VMs need that), at most
    256 GB, a multiple of 1 GB; the other half stays for ESXi and the control plane."""
    smallest = min(h.memory_mb for h in choices.hosts)
    return max(16 * 1024, min(WORKER_MEMORY_CAP_MB, smallest // 2 // 1024 * 1024))


def _template_comment(template: TemplateChoice, what: str) -> str:
    if template.found:
        return f"# {what}: found in vCenter"
    return f"# {what}: BUILD it, not in vCenter yet (templates/README.md builds it under this name)"


def render(name: str, choices: Choices, *, server: str, insecure: bool) -> str:
    """The stack file for stack `name` on the estate of `choices`, vCenter at `server`."""
    if len(choices.hosts) > MAX_HOSTS:
        raise ValueError(f"{len(choices.hosts)} hosts: init writes placeholder addresses for at most {MAX_HOSTS}")
    c = choices
    gpus = c.gpus_per_worker
    linked = c.template.snapshot is not None and (c.gpu_template.snapshot is not None or not c.gpu_template.found)
    snapshot = c.template.snapshot or c.gpu_template.snapshot or "base"
    version = KubernetesSettings.model_fields["version"].default
    minors = f"1.{SUPPORTED_KUBERNETES_MINORS.start}-1.{SUPPORTED_KUBERNETES_MINORS.stop - 1}"
    memory = worker_memory_mb(c)
    oldest = min((h.esxi for h in c.hosts), key=version_tuple)
    mgmt, rdma = MANAGEMENT_SUBNET, RDMA_SUBNET
    lines = [
        f"# {name}: written by `python -m stacks init {name}` from vCenter {server}.",
        "# What was read from vCenter says why it was chosen; `DECIDE:` marks what only you can decide",
        "# (addresses, the control plane's size, the Kubernetes version). The addresses are placeholders",
        "# from RFC 5737's documentation ranges: replace them with your networks' before `pulumi up`.",
        f"# Then: python -m stacks validate {name}; python -m stacks preflight {name} (docs/environments.md).",
        "# No vCenter account here: each run brings its own as VSPHERE_USER / VSPHERE_PASSWORD.",
    ]
    for item in c.left_out:
        lines.append(f"# Left out: {item}.")
    lines += [
        "config:",
        f"  vsphere:vsphereServer: {_scalar(server)}",
        f"  vsphere:allowUnverifiedSsl: '{'true' if insecure else 'false'}'",
        "  vsphere-gpu-cluster:environment:",
        f"    name: {name}",
        "    protect: false",
        "    vcenter:",
        f"      datacenter: {_scalar(c.datacenter)}",
        f"      # The cluster whose hosts have the GPUs ({len(c.hosts)} used).",
        f"      computeCluster: {_scalar(c.cluster)}",
    ]
    others = f"; others: {', '.join(c.datastores_other)}" if c.datastores_other else ""
    lines += [
        f"      # The accessible datastore with the most free space ({c.datastore_free_gb} GB free{others}).",
        f"      datastore: {_scalar(c.datastore)}",
        f"      folder: gpu-cluster/{name}",
        f"      {_template_comment(c.template, 'control-plane template (no vGPU)')}",
        f"      template: {_scalar(c.template.name)}",
        f"      {_template_comment(c.gpu_template, f'GPU workers template (a {c.profile} vGPU)')}",
        f"      gpuTemplate: {_scalar(c.gpu_template.name)}",
    ]
    if linked:
        lines += [
            "      # The templates' snapshot: linked clones (fast, thin) need one.",
            f"      templateSnapshot: {_scalar(snapshot)}",
        ]
    lines += [
        "      templateOs: rocky9",
        "    vm:",
        f"      namePrefix: {name}-gpu",
        f"      linkedClone: {'true' if linked else 'false'}",
        f"      # The newest hardware version the oldest host (ESXi {oldest}) runs (KB 2007240).",
        f"      hardwareVersion: {c.hardware_version}",
        "    # The GPU hosts: each one's RDMA vmnic is the fastest RoCE-capable NIC no switch uses.",
        "    hosts:",
    ]
    for i, host in enumerate(c.hosts):
        lines += [
            f"    - name: {_scalar(host.name)}",
            f"      # {host.why_vmnic}",
            "      rdmaVmnics:",
            f"      - {host.vmnic}",
            f"      vmknicIp: {_address(rdma, 10 + i)}  # DECIDE: an address of rdmaNetwork.subnet",
        ]
    lines += [
        "    rdmaNetwork:",
        f"      switchName: {name}-rdma-dvs",
        f"      # The oldest host's ESXi ({oldest}) bounds the switch version.",
        f"      switchVersion: {c.switch_version}",
        f"      portGroupName: {name}-pvrdma",
        "      vlanId: 0  # DECIDE: the RDMA network's VLAN (0: untagged)",
        f"      subnet: {rdma}  # DECIDE: the RDMA network",
        "      mtu: 9000",
        "      vmknicMtu: 9000",
        "    managementNetwork:",
    ]
    other_networks = f" (others: {', '.join(c.networks_other)})" if c.networks_other else ""
    lines += [
        f"      # DECIDE: the port group of the VMs' management NIC{other_networks}.",
        f"      networkName: {_scalar(c.network)}",
        f"      subnet: {mgmt}  # DECIDE: the management network",
        f"      gateway: {_address(mgmt, 1)}  # DECIDE",
        "      dnsServers:",
        f"      - {_address(mgmt, 2)}  # DECIDE: your DNS server",
        f"      dnsDomain: {name}.example.com  # DECIDE",
        "    hostGraphics:",
        "      manage: true",
        "    # DECIDE: the control plane's size: 3 nodes keep etcd's quorum with one down, 1 is smaller.",
        "    controlPlane:",
        "      vcpus: 8",
        "      memoryMb: 32768",
        "      diskGb: 100",
        "      nodes:",
    ]
    for i in range(CONTROL_PLANE_NODES):
        lines += [f"      - name: cp-{i + 1}", f"        managementIp: {_address(mgmt, 11 + i)}  # DECIDE"]
    gpu_counts = ", ".join(sorted({f"{h.gpus} x {h.board.product}" for h in c.hosts}))
    lines += [
        "    gpuWorkers:",
        f"      vcpus: {WORKER_VCPUS}",
        f"      # Half the smallest host's memory ({min(h.memory_mb for h in c.hosts)} MB), at most 256 GB, all of it "
        "reserved (vGPU).",
        f"      memoryMb: {memory}",
        "      diskGb: 200",
        f"      # One worker per host, one {c.profile} per GPU: the whole GPU each ({gpu_counts} per host).",
        "      # NVIDIA allows several vGPUs in one VM only of a profile that takes a whole GPU.",
        "      vgpuProfiles:",
        *[f"      - {c.profile}" for _ in range(gpus)],
        "      placement: vm-host-rules",
        "      nodes:",
    ]
    for i, host in enumerate(c.hosts):
        lines += [
            f"      - name: worker-{i + 1}",
            f"        managementIp: {_address(mgmt, 100 + i)}  # DECIDE",
            f"        rdmaIp: {_address(rdma, 100 + i)}  # DECIDE",
            f"        host: {_scalar(host.name)}",
        ]
    lines += [
        "    kubernetes:",
        "      mode: bootstrap",
        f"      version: {version}  # DECIDE: a supported release ({minors}, docs/versions.md)",
        "      podCidr: 10.244.0.0/16",
        "      serviceCidr: 10.96.0.0/12",
        f"      controlPlaneEndpoint: k8s-api.{name}.example.com  # DECIDE: the load balancer's name or VIP",
        "    gpu:",
        "      mode: device-plugin",
        "    jobs:",
        "      transport: roce",
        "      sample:",
        "        # Off until the fabric check has passed: both want every GPU at once (docs/training-jobs.md).",
        "        enabled: false",
        f"        slotsPerWorker: {gpus}",
        "      fabricCheck:",
        "        enabled: true",
    ]
    return "\n".join(lines) + "\n"
