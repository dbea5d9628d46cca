"""`plan --graph FILE`: the estate the plan builds, as a picture a newcomer can read.

What will exist where: vCenter (datacenter, compute cluster, datastore, folder) holding each ESXi
host with the GPU worker VM pinned to it (its vGPU profile, sizes and addresses), the control-plane
VMs DRS places, the distributed switch with each host's RDMA uplink and vmknic, its port group
(VLAN, subnet, MTU) and the management network; the Kubernetes cluster on top (version, CNI,
ranges, endpoint, the objects `pulumi up` applies); and the deployment's critical path with the
minutes of each step. Everything is named as the stack file and vCenter name it: no resource type
tokens. `--graph-order` draws the deployment order of our components instead (`graph.py`).

Deterministic: the same plan draws the same file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from components.vsphere.gpu_template import gpu_template_build
from stacks.environment.model import Environment
from stacks.tools.plan.deploy_time.estimate import Estimate
from stacks.tools.plan.deploy_time.words import about, format_seconds
from stacks.tools.plan.mock_runtime import RecordedResource
from stacks.tools.plan.workload_diff import kubernetes_objects

_CRITICAL = 'color="#c0392b", fontcolor="#c0392b", penwidth=2.5'
_COLUMNS = 4
"""Hosts are drawn in at most this many columns (a square grid up to 16 hosts)."""
_MIN_STEP_SECONDS = 5.0
"""Critical-path steps shorter than this are counted, not drawn (instant bookkeeping resources)."""


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _gib(megabytes: int) -> str:
    return f"{megabytes / 1024:g} GiB"


def _critical_steps(timing: Estimate) -> tuple[list[tuple[str, float, float]], int]:
    """(label, start, seconds) of the `pulumi up` critical path's real work, and how many were left out."""
    schedule = timing.pulumi_up
    shown, hidden = [], 0
    for key in schedule.critical_path:
        seconds = timing.seconds.get(key, 0.0)
        if seconds < _MIN_STEP_SECONDS:
            hidden += 1
            continue
        shown.append((timing.labels[key], schedule.start.get(key, 0.0), seconds))
    return shown, hidden


def estate_dot(env: Environment, resources: Sequence[RecordedResource], timing: Estimate, stack: str) -> str:
    """The DOT text of the estate picture."""
    steps, hidden = _critical_steps(timing)
    on_path = " ".join(label.split(": ", 1)[-1] for label, _, _ in steps)

    def critical(name: str) -> bool:
        """A node is on the path when a step names it (its clone, its join wait, its DRS rule)."""
        return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", on_path) is not None

    vc, rdma, mgmt, k8s = env.vcenter, env.rdma_network, env.management_network, env.kubernetes
    workers, control = env.gpu_workers, env.control_plane
    lines = [
        "digraph estate {",
        "  rankdir=LR; compound=true; newrank=true; nodesep=0.15; ranksep=0.5;",
        '  size="38,20";  // inches at 96 dpi: at most 3648 x 1920 pixels, two screens wide',
        '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9, color="#555555"];',
        f"  label={_quote(f'plan {stack}: what `pulumi up` builds, where (red: the critical path)')}; labelloc=t;"
        ' fontname="Helvetica"; fontsize=14;',
    ]
    # vCenter: the hosts, each with its pinned GPU worker(s); the control plane DRS places.
    where = f"vCenter: datacenter {vc.datacenter}, cluster {vc.compute_cluster}\ndatastore {vc.datastore}, folder {vc.folder}"
    lines += [
        "  subgraph cluster_vcenter {",
        f'    label={_quote(where)}; style="rounded,filled"; fillcolor="#eef3f8"; fontname="Helvetica";',
    ]
    profile = ", ".join(workers.vgpu_profiles) if workers.vgpu_profiles else "no vGPU (passthrough)"
    by_host: dict[str, list[str]] = {}
    for node in workers.nodes:
        by_host.setdefault(node.host or "", []).append(node.name)
    for h, host in enumerate(env.hosts):
        host_label = f"ESXi {host.name}\nvmknic {host.vmknic_ip} on {', '.join(host.rdma_vmnics)}"
        lines += [
            f"    subgraph cluster_host{h} {{",
            f'      label={_quote(host_label)}; style="rounded,filled"; fillcolor="#dde7f0";',
        ]
        names = by_host.get(host.name, [])
        for name in names:
            node = next(n for n in workers.nodes if n.name == name)
            vm = env.vm_name(node)
            text = (
                f"GPU worker {name}\nVM {vm}\nvGPU {profile}\n"
                f"{workers.vcpus} vCPU, {_gib(workers.memory_mb)}, {workers.disk_gb} GB disk\n"
                f"mgmt {node.management_ip}  RDMA {node.rdma_ip}"
            )
            red = f", {_CRITICAL}" if critical(name) else ""
            lines.append(f"      worker_{_id(name)} [label={_quote(text)}{red}];")
        if not names:
            lines.append(f'      host{h}_empty [label="no GPU worker", style=dashed];')
        lines.append("    }")
    anchors = [
        f"worker_{_id(by_host[host.name][0])}" if by_host.get(host.name) else f"host{h}_empty"
        for h, host in enumerate(env.hosts)
    ]
    columns = min(_COLUMNS, max(1, math.ceil(math.sqrt(len(anchors)))))
    rows = max(1, math.ceil(len(anchors) / columns))
    for i in range(len(anchors) - rows):
        # Columns of `rows` hosts (stack file order down each column): the picture stays near square.
        lines.append(f"    {anchors[i]} -> {anchors[i + rows]} [style=invis];")
    cp_lines = [f"{n.name}: VM {env.vm_name(n)}, mgmt {n.management_ip}" for n in control.nodes]
    cp_text = (
        f"control plane ({len(control.nodes)} VM{'s' if len(control.nodes) != 1 else ''}, placed by DRS)\n"
        + "\n".join(cp_lines)
        + f"\n{control.vcpus} vCPU, {_gib(control.memory_mb)}, {control.disk_gb} GB disk each"
    )
    cp_critical = any(critical(n.name) for n in control.nodes)
    lines.append(f"    control_plane [label={_quote(cp_text)}{', ' + _CRITICAL if cp_critical else ''}];")
    templates = f"templates: {vc.template} (control plane), {vc.gpu_template or vc.template} (GPU workers)"
    clone = "linked clones" if env.vm.linked_clone else "full clones"
    gpu_template = gpu_template_build(workers.vgpu_profiles).summary()  # its vGPUs, firmware, MMIO
    template_label = f"{templates}\n{clone}, hardware version {env.vm.hardware_version}\nGPU workers': {gpu_template}"
    lines.append(f"    templates [label={_quote(template_label)}, shape=note];")
    lines.append("  }")
    # The networks.
    switch = (
        f"distributed switch {rdma.switch_name} ({rdma.switch_version}), MTU {rdma.mtu}\n"
        f"port group {rdma.port_group_name}: VLAN {rdma.vlan_id}, {rdma.subnet}\n"
        f"uplinks: {len(env.hosts)} hosts' RDMA vmnics; vmknics MTU {rdma.vmknic_mtu}"
    )
    lines.append(f'  switch [label={_quote(switch)}, shape=box3d, fillcolor="#fdf2e0"];')
    management = f"management network {mgmt.network_name}\n{mgmt.subnet}, gateway {mgmt.gateway}"
    lines.append(f'  management [label={_quote(management)}, shape=box3d, fillcolor="#fdf2e0"];')
    for h, host in enumerate(env.hosts):
        anchor = f"worker_{_id(by_host[host.name][0])}" if by_host.get(host.name) else f"host{h}_empty"
        lines.append(
            f"  {anchor} -> switch [ltail=cluster_host{h}, label={_quote(', '.join(host.rdma_vmnics))}, arrowhead=none];"
        )
    lines.append('  control_plane -> management [arrowhead=none, style=dashed, label="mgmt NIC"];')
    # The cluster on top.
    endpoint = k8s.control_plane_endpoint or f"{control.nodes[0].management_ip} (the first control-plane node)"
    cluster = (
        f"Kubernetes {k8s.version} ({k8s.mode}), cluster {env.vm.name_prefix}-k8s\n"
        f"API {endpoint}; CNI {k8s.cni.name} {k8s.cni.version}\n"
        f"pods {k8s.pod_cidr}, services {k8s.service_cidr}\n"
        f"{len(control.nodes)} control-plane + {len(workers.nodes)} GPU worker nodes; GPU: {env.gpu.mode}, "
        f"jobs over {env.jobs.transport}"
    )
    objects = sorted(kubernetes_objects(resources))
    more = f"\n... and {len(objects) - 14} more" if len(objects) > 14 else ""
    applied_label = "applied by pulumi up:\n" + "\n".join(objects[:14]) + more
    lines += [
        "  subgraph cluster_kubernetes {",
        '    label="on top: the Kubernetes cluster"; style="rounded,filled"; fillcolor="#eaf5ea"; fontname="Helvetica";',
        f"    kubernetes [label={_quote(cluster)}];",
        f"    objects [label={_quote(applied_label)}, shape=note];",
        "    kubernetes -> objects [style=invis];",
        "  }",
        '  control_plane -> kubernetes [lhead=cluster_kubernetes, label="kubeadm init/join"];',
        f"  switch -> kubernetes [lhead=cluster_kubernetes, label={_quote(f'RDMA ({env.jobs.transport}) for training')}];",
    ]
    # The critical path, with its minutes.
    total = timing.pulumi_up.seconds
    path_label = f"critical path: {about(total)} ({format_seconds(total)}) until `pulumi up` returns"
    path_lines = [
        f"{number}. {label}: {format_seconds(seconds)} (from {format_seconds(start)})"
        for number, (label, start, seconds) in enumerate(steps, start=1)
    ]
    if hidden:
        path_lines.append(f"({hidden} instant step(s) not listed)")
    path_text = path_label + "\n" + "\n".join(path_lines)
    lines.append(f"  critical_path [label={_quote(path_text)}, shape=note, {_CRITICAL}, fontsize=11];")
    lines.append("  critical_path -> templates [style=invis];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _id(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
