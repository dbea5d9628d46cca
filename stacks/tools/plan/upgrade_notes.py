"""What `plan --against` says about a `kubernetes.version` change: the upgrade's steps in order.

Bootstrap mode: the order the program builds (`components.k8s.upgrade.upgrade`, `components.k8s.
rollout`): the stored ClusterConfiguration first, the control-plane nodes one at a time, kube-proxy
and CoreDNS once they are all back, the workers in `gpuWorkers.maxUnavailable` chains. Existing
mode: the stack does not own the nodes, so it says how to upgrade by hand.

The new VMs get their kubeadm, kubelet and kubectl from the template (the bootstrap installs no
packages, so air-gapped sites work unchanged), which is how Cluster API upgrades too: a new machine
template built at the new version (image-builder). The settle is the guard: a node whose kubelet is
not at the version never counts as back, and the rollout stops there.
"""

from __future__ import annotations

from components.k8s.etcd.versions import UPGRADE_FLOORS, new_line
from components.k8s.upgrade.versions import Version, coredns_version
from components.k8s.version_policy import etcd_image_tag
from stacks.environment.model import Environment


def _names(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 5 else f"{', '.join(names[:3])}, ... {names[-1]} ({len(names)})"


def upgrade_notes(before: Environment, after: Environment) -> list[str]:
    old, new = before.kubernetes.version, after.kubernetes.version
    if Version.parse(old) == Version.parse(new):
        return []
    if after.kubernetes.mode == "existing":
        return [
            f"kubernetes.version {old} -> {new}: kubernetes.mode is existing, so the stack neither owns nor rolls "
            "the nodes; upgrade the cluster with kubeadm (docs/environments.md, Kubernetes upgrade) and set "
            "this to match"
        ]
    target = Version.parse(new)
    control_plane = [node.name for node in after.control_plane.nodes]
    workers = [node.name for node in after.gpu_workers.nodes]
    lanes = after.gpu_workers.max_unavailable
    etcd = etcd_image_tag(new)
    gate = new_line(etcd_image_tag(old), etcd)
    gate_text = (
        f"; etcd moves to {gate[0]}.{gate[1]}: refused until every etcd member runs "
        f"{'.'.join(map(str, UPGRADE_FLOORS[gate]))} or later"
        if gate is not None and gate in UPGRADE_FLOORS
        else ""
    )
    steps = [
        f"1) kube-system/kubeadm-config: kubernetesVersion {target.tag}, etcd.local.imageTag {etcd} (before any node "
        "is replaced; refused if the cluster stores a version more than one minor older, or a newer one"
        f"{gate_text})",
        f"2) control-plane nodes one at a time: {_names(control_plane)} (each drained, its etcd member removed, "
        f"a new VM joined at {new})",
        f"3) kube-proxy {target.tag} and CoreDNS {coredns_version(new)} once every control-plane node runs {new}",
        f"4) GPU workers, {lanes} at a time: {_names(workers)} (beside step 3)",
    ]
    notes = [f"kubernetes.version {old} -> {new}: an upgrade, in this order: " + "; ".join(steps)]
    templates = (before.vcenter.template, before.vcenter.gpu_template)
    if templates == (after.vcenter.template, after.vcenter.gpu_template):
        # The bootstrap installs no packages (docs/bootstrap.md: the template carries kubeadm,
        # kubelet and kubectl of exactly the stack's version), as Cluster API's machine images do.
        notes.append(
            f"vcenter.template and gpuTemplate are unchanged: they must carry kubeadm, kubelet and kubectl {new} "
            f"(rebuilt under the same names). A new VM whose kubelet is not {new} never counts as back, so the "
            f"rollout stops at {control_plane[0]}; build templates at {new} and name them in this change"
        )
    if len(control_plane) == 1:
        notes.append(
            f"a single control-plane node ({control_plane[0]}) cannot be upgraded by replacement: its new VM starts a "
            "new, empty cluster. Refused unless stated (`--accept-rebuild kubernetes.version`); to keep the cluster, "
            "upgrade it in place with kubeadm first (docs/environments.md, Kubernetes upgrade)"
        )
    return notes
