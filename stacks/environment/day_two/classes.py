"""What changing each stack key does to a running environment: its day-two class (issue 28).

Every key of `Environment` (`key_paths.model_keys`) has an entry; the table test fails for a key
without one. Classes:
- `in-place`: the next `pulumi up` applies it, without replacing a node;
- `rolls-nodes`: part of a node's generation (`stacks.wiring.rollout`): each node is replaced by a
  new VM, one at a time, through the rolling update (docs/environments.md, day two);
- `rebuild`: a live cluster cannot take it safely; refused by `plan --against` unless stated;
- `no-effect-on-existing`: once the cluster exists the value lives elsewhere (kubeadm's stored
  ClusterConfiguration, Calico's IPPools, first-boot data a node read once), so the change reaches
  only nodes created later. Refused where that split would break the cluster.

Each entry says what will and will not happen, the safe procedure, and the upstream rule it rests
on. Pure data: `day_two_check` compares two environments with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from stacks.environment.day_two.entries import (
    CLUSTER_IDENTIFIER,
    CLUSTER_STORED,
    CONTROL_PLANE_ONLY_NONE,
    ENGINE_SETTINGS,
    ETCD_PEERS,
    FABRIC_IN_PLACE,
    FIRST_BOOT,
    FIRST_BOOT_ONLY,
    HEADLINES,
    IMMUTABLE_PLACEMENT,
    KUBERNETES_OBJECTS,
    NEW_NODES_ONLY_TEMPLATE_FACT,
    NODE_ADDRESS,
    NOTHING_LIVE,
    ROLLS,
    ROLLS_CONTROL_PLANE,
    TIMEOUT,
    VNIC_UPDATE,
    DayTwo,
    DayTwoClass,
    lone_control_plane,
    rebuild,
)
from stacks.environment.day_two.mirror import MIRROR_KEYS
from stacks.environment.key_paths import model_keys

__all__ = ["DAY_TWO", "HEADLINES", "DayTwo", "DayTwoClass", "undeclared_keys"]

_JOB_KEYS = (
    *(f"jobs.{k}" for k in ("transport", "namespace", "workers", "extraEnv", "siteImage")),
    *(f"jobs.sample.{k}" for k in ("enabled", "benchmark", "image", "model", "batchSize", "numBatches")),
    *(f"jobs.sample.{k}" for k in ("slotsPerWorker", "shmSize", "scriptPath")),
    *(f"jobs.fabricCheck.{k}" for k in ("enabled", "image", "linkGbps", "minBusBandwidthShare")),
)
"""The jobs are Kubernetes objects the stack applies: every key of them takes effect in place."""

_MONITORING_KEYS = (
    *(f"monitoring.{k}" for k in ("enabled", "exporterImage", "scrape", "serviceMonitorLabels")),
    *(f"monitoring.prometheus.{k}" for k in ("enabled", "image", "retentionHours", "storageLimitGi")),
)
"""The DCGM exporter and the minimal Prometheus are add-ons the stack applies: in place. The
Prometheus keeps its data in an emptyDir, so a change that restarts it starts its history anew."""

_TUNING_KEYS = (
    *(f"tuning.{k}" for k in ("enabled", "namespace")),
    *(f"tuning.trainer.{k}" for k in ("version", "manifestUrl")),
    *(f"tuning.katib.{k}" for k in ("enabled", "version", "dbStorageClass", "manifestUrl")),
    *(f"tuning.sample.{k}" for k in ("enabled", "image", "nodes", "batchSizes", "steps", "maxTrials")),
    "tuning.sample.parallelTrials",
)
"""Trainer, Katib and the sample are Kubernetes objects the stack applies: in place. Katib's DB
claim keeps its StorageClass once bound (a claim's class cannot change); a new class replaces the
claim and the experiments' history with it."""


def _no_old_member_left(before: Any, after: Any) -> bool:
    return not set(before) & set(after)


DAY_TWO: Mapping[str, DayTwo] = {
    "name": NOTHING_LIVE,
    "protect": DayTwo(
        "in-place",
        "Pulumi records the protect flag on the switch, port group, folder and VMs in the state; nothing in vCenter "
        "changes",
        "`pulumi up` (to lift it for a rolling change, see docs/environments.md, production)",
    ),
    "vcenter.datacenter": rebuild(
        "every lookup moves to another datacenter: the switch, port group, folder and every VM would be created "
        "there and the old ones deleted, the cluster with them",
        "build a new environment there (`python -m stacks clone`), move the workloads, destroy this one; or state "
        "it with `--accept-rebuild vcenter.datacenter`",
        IMMUTABLE_PLACEMENT,
    ),
    "vcenter.computeCluster": rebuild(
        "the VMs' resource pool and the DRS rules move to another cluster: the rules are replaced, every VM is "
        "migrated at once (vGPU VMs cannot move to hosts without their GPU profile)",
        "build the environment in the new cluster and move the workloads; or state it with "
        "`--accept-rebuild vcenter.computeCluster`",
        IMMUTABLE_PLACEMENT,
    ),
    "vcenter.datastore": rebuild(
        "every VM's files and disks are storage-vMotioned to the new datastore at once (linked clones lose their "
        "shared base disk)",
        "move the VMs with Storage vMotion in vCenter one at a time first, then set it here with "
        "`--accept-rebuild vcenter.datastore` (pulumi-vsphere then finds them there)",
        IMMUTABLE_PLACEMENT,
    ),
    "vcenter.folder": DayTwo(
        "in-place",
        "the folder is renamed or moved and the VMs with it; nothing restarts",
        "`pulumi up`; the parent folders must exist",
        "terraform-provider-vsphere vsphere_folder: only type and datacenter_id are ForceNew, path is updated",
    ),
    "vcenter.resourcePool": DayTwo(
        "in-place",
        "the VMs move to the other resource pool of the same cluster (a relocate without vMotion); nothing restarts. "
        "Template copies (`vcenter.templateReplicas`) stay as they are: a template belongs to no pool, the pool only "
        "places a copy's clone, so copies made later go to the new pool and no worker rolls",
        "create the pool first, then `pulumi up`",
        "terraform-provider-vsphere vsphere_virtual_machine: resource_pool_id is updated by a relocate; "
        "components/vsphere/template_copies/replica.py: the pool is recorded in place on a copy",
    ),
    "vcenter.template": ROLLS_CONTROL_PLANE,
    "vcenter.gpuTemplate": ROLLS,
    # A worker's generation includes its template copy's site: moving or adding copies makes new
    # copies first (create-before-delete), then rolls the workers whose copy changed.
    "vcenter.templateReplicas": ROLLS,
    "vcenter.templateReplicas[].host": ROLLS,
    "vcenter.templateReplicas[].datastore": ROLLS,
    # A template copy keeps its snapshot's name (in place, nothing rolls): linked clones hang off the
    # copy's current snapshot whatever its name; copies made later take the new one.
    "vcenter.templateSnapshot": DayTwo(
        NEW_NODES_ONLY_TEMPLATE_FACT.cls,
        f"{NEW_NODES_ONLY_TEMPLATE_FACT.happens}; template copies (`vcenter.templateReplicas`) keep their "
        "snapshot's old name, copies made later take the new one, and no worker rolls",
        NEW_NODES_ONLY_TEMPLATE_FACT.procedure,
        f"{NEW_NODES_ONLY_TEMPLATE_FACT.source}; components/vsphere/template_copies/replica.py: the copy's snapshot name "
        "is recorded in place",
    ),
    "vcenter.templateOs": NEW_NODES_ONLY_TEMPLATE_FACT,
    "vm.namePrefix": rebuild(
        "every VM and DRS rule is renamed, and the cluster's name (`<namePrefix>-k8s`) changes: it is the "
        "Kubernetes provider's clusterIdentifier, so Pulumi replaces the provider and with it every object the "
        "stack applied (add-ons and jobs deleted and re-created), while kubeadm keeps the old clusterName",
        "keep the prefix; for new names build a new environment (`python -m stacks clone`). State it with "
        "`--accept-rebuild vm.namePrefix`",
        CLUSTER_IDENTIFIER,
    ),
    "vm.linkedClone": ROLLS_CONTROL_PLANE,
    "vm.hardwareVersion": ROLLS_CONTROL_PLANE,
    "vm.cloneTimeoutMinutes": TIMEOUT,
    "vm.powerTimeoutMinutes": TIMEOUT,
    "hosts": DayTwo(
        "in-place",
        "an added host joins the switch and gets its vmknic, PVRDMA settings and graphics mode; a removed one "
        "leaves after its VMs are gone; other hosts are untouched",
        "scale out/in as docs/environments.md (day two) describes: the host and its worker in one change",
    ),
    "hosts[].name": DayTwo(
        "in-place",
        "hosts are matched by name: a new name is a removal of the old host and an addition of the new one",
        "move the workers pinned to it in the same change (`gpuWorkers.nodes[].host`)",
    ),
    "hosts[].rdmaVmnics": FABRIC_IN_PLACE,
    "hosts[].vmknicIp": DayTwo(
        "in-place",
        "the host's PVRDMA vmknic is re-addressed in place; RDMA traffic of that host's VMs pauses meanwhile; "
        "the VMs keep their own addresses",
        "run it when no training job uses that host, then `pulumi up`",
        VNIC_UPDATE,
    ),
    "rdmaNetwork.switchName": FABRIC_IN_PLACE,
    "rdmaNetwork.switchVersion": DayTwo(
        "in-place",
        "the distributed switch is upgraded in place (vSphere cannot downgrade one); every member host must run "
        "at least that ESXi version",
        "upgrade the hosts first; run it when no training job is running",
        "terraform-provider-vsphere vsphere_distributed_virtual_switch: version is updated in place",
    ),
    "rdmaNetwork.portGroupName": FABRIC_IN_PLACE,
    "rdmaNetwork.vlanId": FABRIC_IN_PLACE,
    "rdmaNetwork.subnet": DayTwo(
        "no-effect-on-existing",
        "the hosts' vmknics get the new netmask in place, but existing workers keep their PVRDMA addresses (first "
        "boot), which no longer match: old and new workers cannot reach each other over RDMA",
        "replace every worker (new names, a few at a time) in the same change as the new addresses; state it with "
        "`--accept-rebuild rdmaNetwork.subnet`",
        FIRST_BOOT,
        refuse=True,
    ),
    "rdmaNetwork.gateway": FIRST_BOOT_ONLY,
    "rdmaNetwork.mtu": FABRIC_IN_PLACE,
    "rdmaNetwork.vmknicMtu": DayTwo(
        "no-effect-on-existing",
        "the hosts' vmknics take the new MTU in place, but existing workers keep the MTU of their PVRDMA NIC from "
        "their first boot: a mismatched MTU drops jumbo RoCE frames",
        "set the workers' interface MTU by hand (nmcli) in the same window, or replace the workers",
        f"{FIRST_BOOT}; {VNIC_UPDATE}",
    ),
    "rdmaNetwork.lldp": FABRIC_IN_PLACE,
    "managementNetwork.networkName": DayTwo(
        "in-place",
        "every node's management NIC is moved to the other port group at once, live; the guests keep their "
        "addresses, so the new port group must carry the same subnet",
        "make sure the new port group reaches the same subnet, then `pulumi up`",
        "terraform-provider-vsphere virtual_machine_network_interface_subresource.go: a network_id change edits "
        "the NIC's backing in place",
    ),
    "managementNetwork.subnet": FIRST_BOOT_ONLY,
    "managementNetwork.gateway": FIRST_BOOT_ONLY,
    "managementNetwork.dnsServers": FIRST_BOOT_ONLY,
    "managementNetwork.dnsDomain": FIRST_BOOT_ONLY,
    "hostGraphics.manage": DayTwo(
        "in-place",
        "the host graphics resource switches between setting Shared Direct and only checking it; a host already "
        "in Shared Direct is not touched",
        "`pulumi up`",
    ),
    "controlPlane.vcpus": ROLLS_CONTROL_PLANE,
    "controlPlane.memoryMb": ROLLS_CONTROL_PLANE,
    "controlPlane.diskGb": DayTwo(
        "in-place",
        "full clones' disks grow online (a linked clone keeps the template's size); disks cannot shrink",
        "grow the guest's filesystem afterwards (growpart/xfs_growfs)",
        "terraform-provider-vsphere disk subresource: 'virtual disks cannot be shrunk'",
    ),
    "controlPlane.nodes": DayTwo(
        "in-place",
        "an added member joins (kubeadm join --control-plane); a removed one is drained and its etcd member "
        "removed, quorum checked, before its VM goes. With no old member left the new VMs start a new, empty "
        "cluster",
        "add or remove one member at a time, keeping an odd count; replacing every member at once is a rebuild: "
        "state it with `--accept-rebuild controlPlane.nodes`",
        ETCD_PEERS,
        refuse_when=_no_old_member_left,
    ),
    "controlPlane.nodes[].name": DayTwo(
        "in-place",
        "nodes are matched by name: a new name removes the old member and adds a new one",
        "rename one member at a time (see controlPlane.nodes)",
    ),
    "controlPlane.nodes[].managementIp": NODE_ADDRESS,
    "controlPlane.nodes[].rdmaIp": CONTROL_PLANE_ONLY_NONE,
    "controlPlane.nodes[].host": CONTROL_PLANE_ONLY_NONE,
    "gpuWorkers.vcpus": ROLLS,
    "gpuWorkers.memoryMb": ROLLS,
    "gpuWorkers.diskGb": DayTwo(
        "in-place",
        "full clones' disks grow online (a linked clone keeps the template's size); disks cannot shrink",
        "grow the guest's filesystem afterwards (growpart/xfs_growfs)",
        "terraform-provider-vsphere disk subresource: 'virtual disks cannot be shrunk'",
    ),
    "gpuWorkers.nodes": DayTwo(
        "in-place",
        "an added worker is cloned and joins; a removed one is drained (PodDisruptionBudgets honoured) before its "
        "VM is deleted; the others are untouched",
        "scale out/in as docs/environments.md (day two) describes",
    ),
    "gpuWorkers.nodes[].name": DayTwo(
        "in-place",
        "workers are matched by name: a new name drains and removes the old worker and adds a new one",
        "rename a few at a time: each rename is a scale in plus a scale out",
    ),
    "gpuWorkers.nodes[].managementIp": NODE_ADDRESS,
    "gpuWorkers.nodes[].rdmaIp": NODE_ADDRESS,
    "gpuWorkers.nodes[].host": DayTwo(
        "in-place",
        "with `vm-host-rules` the worker's pin moves and vCenter migrates the running VM (a vGPU VM needs vGPU "
        "vMotion enabled, else the migration fails); otherwise the host was only where it was first placed",
        "power the worker off or enable vGPU migration in vCenter first; drain it (`kubectl drain`)",
    ),
    "gpuWorkers.vgpuProfiles": ROLLS,
    "gpuWorkers.memoryReservationMb": DayTwo(
        "in-place",
        "validate accepts only `memoryMb` here (the reservation always follows memory), so it changes nothing",
        "leave it unset",
    ),
    "gpuWorkers.placement": DayTwo(
        "in-place",
        "DRS rules are created or deleted; with `vm-host-rules` vCenter moves each worker to its `host` if it is "
        "elsewhere (a vGPU VM needs vGPU vMotion)",
        "check where each worker runs first (`python -m stacks preflight`), then `pulumi up`",
    ),
    "gpuWorkers.maxUnavailable": DayTwo(
        "in-place",
        "only the order of later rolling changes changes; no node is replaced",
        "`pulumi up`",
    ),
    "kubernetes.mode": rebuild(
        "bootstrap -> existing deletes the stack's bootstrap, join token and control-plane guards, and deleting "
        "a guard removes its etcd member; existing -> bootstrap would wait for a kubeadm init the running VMs "
        "never run",
        "build a new environment in the other mode and move the workloads; or state it with "
        "`--accept-rebuild kubernetes.mode`",
        "components/k8s/etcd/member.py: the guard removes its member on delete; " + FIRST_BOOT,
    ),
    "kubernetes.version": DayTwo(
        "rolls-nodes",
        "an upgrade: kube-system/kubeadm-config's kubernetesVersion is set first, then every node is replaced by a "
        "new VM that joins at the new version, control plane first and one at a time, then kube-proxy and CoreDNS "
        "move to it, the workers rolling beside them (bootstrap mode; in existing mode nothing changes). A skipped "
        "minor or a downgrade is refused outright. With a single control-plane node its new VM starts a new, empty "
        "cluster: refused unless stated",
        "one minor at a time, `plan --against` first; build vcenter.template (and gpuTemplate) with kubeadm, "
        "kubelet and kubectl at the version and name them in the same change (the bootstrap installs no packages; "
        "a node whose kubelet is not at the version stops the rollout); lift `protect` in production "
        "(docs/environments.md, Kubernetes upgrade)",
        "kubernetes-sigs/cluster-api controlplane/kubeadm/internal/controllers/upgrade.go and controller.go (the "
        "same order); https://kubernetes.io/releases/version-skew-policy/; kubeadm upgrades one minor at a time "
        "(cmd/kubeadm/app/constants/constants.go, MinimumControlPlaneVersion)",
        refuse_in=lone_control_plane,
    ),
    "kubernetes.podCidr": CLUSTER_STORED["pod"],
    "kubernetes.serviceCidr": CLUSTER_STORED["service"],
    "kubernetes.controlPlaneEndpoint": CLUSTER_STORED["endpoint"],
    "kubernetes.cni.name": FIRST_BOOT_ONLY,
    "kubernetes.cni.version": DayTwo(
        "no-effect-on-existing",
        "the first control-plane node applied Calico's operator once at its first boot: the running Calico keeps "
        "its version",
        "upgrade Calico with its operator manifest (`kubectl replace -f tigera-operator.yaml` of the new release, "
        "https://docs.tigera.io/calico/latest/operations/upgrading/kubernetes-upgrade), then set it here",
        FIRST_BOOT,
    ),
    "kubernetes.cni.operatorManifestUrl": FIRST_BOOT_ONLY,
    "kubernetes.gpuNodeTaint": DayTwo(
        "no-effect-on-existing",
        "kubeadm sets a node's taints when it joins: existing workers keep theirs, later ones get the new setting",
        "`kubectl taint nodes <worker> nvidia.com/gpu=present:NoSchedule` (or with `-` to remove) on each worker",
        FIRST_BOOT,
    ),
    "kubernetes.sshAuthorizedKeys": DayTwo(
        "no-effect-on-existing",
        "existing nodes keep the keys of their first boot: a key removed here still opens them",
        "remove or add the key in ~/.ssh/authorized_keys on each node by hand (or replace the nodes)",
        FIRST_BOOT,
    ),
    # The node firewall's nftables ruleset is written by cloud-init at first boot and is not part of a
    # node's generation (stacks/wiring/rollout.py): existing nodes keep theirs.
    "kubernetes.nodeFirewall.enabled": FIRST_BOOT_ONLY,
    "kubernetes.nodeFirewall.adminNetworks": FIRST_BOOT_ONLY,
    "kubernetes.nodeFirewall.loadBalancerSources": FIRST_BOOT_ONLY,
    # A new key list changes the control plane's generation (stacks/wiring/rollout.py): each API
    # server gets the new EncryptionConfiguration on a new VM, one at a time (docs/security.md gives
    # the rotation's steps, one `pulumi up` each).
    "kubernetes.secretsEncryptionKeys": ROLLS_CONTROL_PLANE,
    "kubernetes.apiReadyTimeoutMinutes": TIMEOUT,
    "kubernetes.drainTimeoutMinutes": TIMEOUT,
    "kubernetes.rolloutTimeoutMinutes": TIMEOUT,
    "kubernetes.joinTokenTtlHours": DayTwo(
        "in-place",
        "the token rotation takes the new lifetime; the next `pulumi up` past half of it issues a new token",
        "`pulumi up`",
    ),
    "gpu.mode": DayTwo(
        "no-effect-on-existing",
        "the device plugin and the GPU Operator swap in place, but existing workers keep the containerd runtime "
        "and guest driver of their first boot: the operator's driver pods fail beside a preinstalled driver",
        "switch together with a GPU template made for the new mode (so the workers roll); state it with "
        "`--accept-rebuild gpu.mode`",
        "NVIDIA GPU Operator: with a preinstalled driver set driver.enabled=false "
        "(https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html); " + FIRST_BOOT,
        refuse=True,
    ),
    "gpu.devicePluginImage": KUBERNETES_OBJECTS,
    "gpu.gpuOperator.chartVersion": KUBERNETES_OBJECTS,
    "gpu.gpuOperator.driverRepository": KUBERNETES_OBJECTS,
    "gpu.gpuOperator.driverVersion": KUBERNETES_OBJECTS,
    "gpu.gpuOperator.griddConf": KUBERNETES_OBJECTS,
    "rdma.resourceName": KUBERNETES_OBJECTS,
    "rdma.resourcePrefix": KUBERNETES_OBJECTS,
    "rdma.hcaMax": KUBERNETES_OBJECTS,
    "rdma.vendors": KUBERNETES_OBJECTS,
    "rdma.deviceIds": KUBERNETES_OBJECTS,
    "rdma.drivers": KUBERNETES_OBJECTS,
    "mpiOperator.version": KUBERNETES_OBJECTS,
    "mpiOperator.placement": KUBERNETES_OBJECTS,
    "mpiOperator.crdUrl": KUBERNETES_OBJECTS,
    **dict.fromkeys(_JOB_KEYS, KUBERNETES_OBJECTS),
    **dict.fromkeys(_MONITORING_KEYS, KUBERNETES_OBJECTS),
    **dict.fromkeys(_TUNING_KEYS, KUBERNETES_OBJECTS),
    **dict.fromkeys(("pulumiUp.parallel", "pulumiUp.runnerCpus", "pulumiUp.backend"), ENGINE_SETTINGS),
    **MIRROR_KEYS,
}


def undeclared_keys(model: type[BaseModel]) -> list[str]:
    """Keys of `model` with no day-two entry: each must say what changing it does (the table test)."""
    return sorted(key for key in model_keys(model) if key not in DAY_TWO)
