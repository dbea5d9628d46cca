"""The rolling-update order of the nodes and each node's generation (`components.k8s.rollout.rollout`).

Order: the control plane before the workers (a kubelet must not be newer than the API server it
talks to: Kubernetes' version skew policy), in the stack file's order, so the node that ran
`kubeadm init` first: the API readiness check and with it the join token's Secret wait for that
node's VM, and a member replaced before it would wait for a token the cluster does not have yet
(a rotated one). Its new VM finds the other members serving and joins them (the bootstrap probes
them first). Workers go in `gpuWorkers.maxUnavailable` chains side by side.

A node's generation hashes what the node is made of, so that a change to it replaces the node
(immutable nodes), one at a time:
- its pool's template, by name and by id (a template rebuilt under the same name has a new id,
  and pulumi-vsphere replaces a VM on any `clone` change), and `vm.linkedClone`;
- its pool's vCPUs and memory, and `vm.hardwareVersion` (pulumi-vsphere would otherwise shut every
  VM down at once to change them: CPU and memory hot-add are never enabled here);
- on GPU workers, the vGPU profiles: a new VM gets its vGPU from the template at its first power-on;
  and the copy of the template it clones (`vcenter.templateReplicas`), by site: a template change
  replaces the copies first (each VM's clone source depends on its copy), then the rollout
  re-creates each worker from its new copy.
The control-plane generation also hashes the API server's settings (its kubeadm flags and
volumes, the Pod Security defaults, the audit policy: `api_server_revision`), which reach a node
only on a new VM; their arrival on a cluster deployed before them rolls its control plane once.
Only with more than one control-plane node: a lone one's replacement is a new, empty cluster.
A change to `kubernetes.secretsEncryptionKeys` (a key rotation step) rolls the control plane too:
only a new control-plane VM gets the new EncryptionConfiguration. So does the stack's etcd image tag
(`components.k8s.version_policy`): only a new control-plane VM joins with it. Beside it, each step carries `kubernetes.version`: a new version rolls every node the same way
(control plane first, so no kubelet is newer than its API server), after the cluster's stored
ClusterConfiguration moved to it and before kube-proxy and CoreDNS do (`components.k8s.upgrade.upgrade`).
It is kept out of the hash so that generations recorded before it keep their value: folding it in
would have rolled every node of every stack once. Not in it either: the disk size (grown online).
"""

from __future__ import annotations

import hashlib
import json

import pulumi
import pulumi_vsphere as vsphere

from components.k8s.bootstrap import ClusterBootstrap
from components.k8s.node_bootstrap import host_files
from components.k8s.node_bootstrap.api_server import api_server_settings
from components.k8s.rollout.rollout import RolloutArgs, RolloutStep
from components.k8s.upgrade.upgrade import EtcdAccess
from components.k8s.version_policy import etcd_image_tag
from components.vsphere.template_copies.plan import ReplicaSite
from stacks.environment.model import Environment
from stacks.wiring.replicas import worker_sites
from stacks.wiring.vsphere import Inventory

DEFAULT_SECRETS_ENCRYPTION_KEYS = ["key-1"]


def generation(*parts: object) -> str:
    """A short, stable hash of what a node is made of (a valid label value: 12 hex digits)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


def api_server_revision() -> str:
    """A hash of what every control-plane node's API server is configured with beside the
    encryption keys: kubeadm's `apiServer` flags and volumes, the Pod Security defaults and the
    audit policy (components/k8s/node_bootstrap/api_server.py)."""
    files = [host_files.host_file(name) for name in (host_files.ADMISSION_CONFIGURATION, host_files.AUDIT_POLICY)]
    return generation(api_server_settings(), *files)


def _template_id(name: str, inventory: Inventory) -> pulumi.Output[str]:
    return vsphere.get_virtual_machine_output(name=name, datacenter_id=inventory.datacenter_id).id


def control_plane_generation(env: Environment, inventory: Inventory) -> pulumi.Output[str]:
    parts = control_plane_parts(env)
    return _template_id(env.vcenter.template, inventory).apply(lambda template_id: generation(*parts, template_id))


def control_plane_parts(env: Environment) -> tuple[object, ...]:
    """What a control-plane node is made of, but its template's id (module docstring)."""
    pool, vm = env.control_plane, env.vm
    parts: tuple[object, ...] = (
        "control-plane",
        env.vcenter.template,
        vm.linked_clone,
        vm.hardware_version,
        pool.vcpus,
        pool.memory_mb,
    )
    # The etcd each control-plane node runs is the stored ClusterConfiguration's tag, read at its
    # `kubeadm join` (components.k8s.upgrade.upgrade): a new tag reaches the members only on new
    # VMs, one at a time. This rolls every control plane once when it first applies: a kubeadm-built
    # cluster runs kubeadm's pin (3.5.24 at 1.32/1.33, below etcd's 3.5.32 floor for 3.6).
    # The API server's flags and the admission and audit files: they reach a control-plane node
    # only on a new VM (cloud-init writes the files once; its join reads the flags from the stored
    # ClusterConfiguration, which the version step updates first). A change to them, or their
    # first arrival on a cluster deployed before this part existed, rolls the control plane once,
    # one node at a time with etcd's quorum kept. Neither for a lone control-plane node: its
    # replacement would take etcd's data with it and `kubeadm init` a new, empty cluster
    # (docs/environments.md); `stacks verify` reports what it lacks, and adding two control-plane
    # nodes lets it roll. Both arrive in one roll on a cluster deployed before them.
    if len(pool.nodes) > 1:
        parts += (("etcd", etcd_image_tag(env.kubernetes.version)), ("api-server", api_server_revision()))
    keys = env.kubernetes.secrets_encryption_keys
    if keys != DEFAULT_SECRETS_ENCRYPTION_KEYS:
        # A rotation step (docs/security.md) reaches the API servers only on new control-plane
        # VMs (cloud-init writes the EncryptionConfiguration once). Left out while it is the
        # default, so that generations recorded before it keep their value.
        parts += (("secrets-encryption-keys", *keys),)
    return parts


def gpu_worker_generation(
    env: Environment, inventory: Inventory, site: ReplicaSite | None = None
) -> pulumi.Output[str]:
    """`site`: the copy of the template the worker clones (None: the template itself). A worker
    moved to another copy rolls, before its old copy is removed (TemplateReplica's module doc)."""
    pool, vm, template = env.gpu_workers, env.vm, env.vcenter.gpu_template or env.vcenter.template
    parts = ("gpu-worker", template, vm.linked_clone, vm.hardware_version, pool.vcpus, pool.memory_mb,
             list(pool.vgpu_profiles))  # fmt: skip
    # Without a copy the parts stay as they were: a stack that keeps no copies rolls nothing.
    source = () if site is None else ([site.host, site.datastore],)
    return _template_id(template, inventory).apply(lambda template_id: generation(*parts, template_id, *source))


def rollout_steps(env: Environment, inventory: Inventory) -> list[RolloutStep]:
    """Every node in rollout order, each knowing the node whose settle its gate waits for: the
    control plane one by one, then `gpuWorkers.maxUnavailable` chains of workers side by side
    (worker i waits for worker i - maxUnavailable, the first ones for the last control-plane node)."""
    control_plane_nodes = [node.name for node in env.control_plane.nodes]
    control_plane = control_plane_generation(env, inventory)
    # One Output per copy of the GPU template, not per worker (plan time at 512 workers).
    sites = worker_sites(env)
    by_site = {site: gpu_worker_generation(env, inventory, site) for site in dict.fromkeys(sites.values())}
    version = env.kubernetes.version
    steps: list[RolloutStep] = []
    previous = ""
    for name in control_plane_nodes:
        steps.append(
            RolloutStep(
                node_name=name,
                generation=control_plane,
                previous_node=previous,
                control_plane=True,
                kubernetes_version=version,
            )
        )
        previous = name
    workers = [node.name for node in env.gpu_workers.nodes]
    lanes, gpus = env.gpu_workers.max_unavailable, len(env.gpu_workers.vgpu_profiles)
    for i, name in enumerate(workers):
        after = workers[i - lanes] if i >= lanes else previous
        steps.append(
            RolloutStep(
                node_name=name,
                generation=by_site[sites[name]],
                previous_node=after,
                gpus=gpus,
                kubernetes_version=version,
            )
        )
    return steps


def rollout_args(env: Environment, bootstrap: ClusterBootstrap) -> RolloutArgs:
    """Bootstrap mode only (in `existing` mode nothing joins a new VM, so nothing could come back).
    The generations and settles take the kubeconfig straight from the bootstrap's PKI, not from
    `ClusterAccess`, which waits for the VMs."""
    return RolloutArgs(
        kubeconfig=bootstrap.kubeconfig,
        timeout_seconds=env.kubernetes.rollout_timeout_minutes * 60,
        kubernetes_version=env.kubernetes.version,
        # The version step keeps the stack's etcd tag in kubeadm-config, and reads every etcd
        # member's version before a change of etcd line (3.5 -> 3.6, 3.6 -> 3.7).
        etcd_image_tag=etcd_image_tag(env.kubernetes.version),
        # Kept in the stored ClusterConfiguration before any node is replaced (issue 40 item 3).
        api_server=api_server_settings(),
        etcd=EtcdAccess(
            addresses=[str(node.management_ip) for node in env.control_plane.nodes],
            ca_pem=bootstrap.etcd_ca_certificate_pem,
            client_cert_pem=bootstrap.etcd_client_certificate_pem,
            client_key_pem=bootstrap.etcd_client_key_pem,
        ),
    )
