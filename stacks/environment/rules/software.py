"""Rules for the software on the cluster: settings the chosen mode would silently ignore, the RDMA
device plugin's selectors, and names that collide with what the program itself creates.
"""

from __future__ import annotations

from collections.abc import Iterator

from components.k8s.facts import CALICO_TESTED_KUBERNETES
from components.k8s.vendored import CALICO_OPERATOR, pinned_releases
from components.k8s.version_policy import POLICY
from stacks.environment.model import Environment
from stacks.environment.registry import Problem, rule

PROGRAM_NAMESPACES = {
    "nvidia-device-plugin": "the NVIDIA device plugin",
    "gpu-operator": "the GPU Operator",
    "rdma-device-plugin": "the RDMA shared device plugin",
    "mpi-operator": "the MPI Operator",
    "gpu-monitoring": "the dcgm-exporter (monitoring)",
    "prometheus": "the minimal Prometheus (monitoring.prometheus)",
    "calico-system": "Calico",
    "calico-apiserver": "Calico",
    "tigera-operator": "Calico's tigera-operator",
    "kube-system": "Kubernetes itself",
    "kube-public": "Kubernetes itself",
    "kube-node-lease": "Kubernetes itself",
    "default": "Kubernetes itself (and it cannot carry our Pod Security labels)",
}
"""Namespaces the program's components (components/k8s/addons/*) or the cluster create; the jobs'
namespace is created with its own Pod Security labels, so it must be none of these."""

BOOTSTRAP_ONLY = {
    "controlPlaneEndpoint": "control_plane_endpoint",
    "cni": "cni",
    "sshAuthorizedKeys": "ssh_authorized_keys",
    "apiReadyTimeoutMinutes": "api_ready_timeout_minutes",
    "gpuNodeTaint": "gpu_node_taint",
}
"""kubernetes.* keys only the kubeadm bootstrap reads (stacks/wiring/kubernetes.py)."""


@rule
def monitoring_settings_are_used(env: Environment) -> Iterator[Problem]:
    monitoring = env.monitoring
    if "exporter_image" not in monitoring.model_fields_set:
        return
    if not monitoring.enabled:
        yield Problem(
            ("monitoring", "exporterImage"),
            "is ignored with monitoring.enabled false (no exporter is deployed); remove it or enable monitoring",
        )
    elif env.gpu.mode == "gpu-operator":
        yield Problem(
            ("monitoring", "exporterImage"),
            "is ignored with gpu.mode 'gpu-operator' (the operator runs its own pinned dcgm-exporter); remove it",
        )


@rule
def minimal_prometheus_can_scrape_the_exporter(env: Environment) -> Iterator[Problem]:
    monitoring = env.monitoring
    if monitoring.prometheus.enabled and monitoring.enabled and monitoring.scrape == "service-monitor":
        yield Problem(
            ("monitoring", "scrape"),
            "'service-monitor' with monitoring.prometheus.enabled: the minimal Prometheus reads only "
            "prometheus.io/* pod annotations, not ServiceMonitors; set scrape: annotations, or disable "
            "the minimal Prometheus and let your Prometheus Operator scrape",
        )


@rule
def service_monitor_labels_need_a_service_monitor(env: Environment) -> Iterator[Problem]:
    monitoring = env.monitoring
    if not monitoring.service_monitor_labels:
        return
    if not monitoring.enabled or monitoring.scrape != "service-monitor":
        yield Problem(
            ("monitoring", "serviceMonitorLabels"),
            "labels a ServiceMonitor, which only monitoring.enabled true with scrape 'service-monitor' renders; "
            "remove it or set scrape: service-monitor",
        )


@rule
def gpu_settings_match_the_mode(env: Environment) -> Iterator[Problem]:
    gpu = env.gpu
    if gpu.mode == "gpu-operator" and gpu.gpu_operator is None:
        yield Problem(
            ("gpu", "gpuOperator"),
            "missing; gpu.mode 'gpu-operator' needs driverRepository and driverVersion for the vGPU guest driver",
        )
    if gpu.mode == "device-plugin" and gpu.gpu_operator is not None:
        yield Problem(
            ("gpu", "gpuOperator"),
            "is ignored with gpu.mode 'device-plugin' (the guest driver comes from the template); remove it, "
            "or set gpu.mode: gpu-operator",
        )
    if gpu.mode == "gpu-operator" and "device_plugin_image" in gpu.model_fields_set:
        yield Problem(
            ("gpu", "devicePluginImage"),
            "is ignored with gpu.mode 'gpu-operator' (the operator runs its own device plugin); remove it",
        )


@rule
def bootstrap_settings_need_bootstrap_mode(env: Environment) -> Iterator[Problem]:
    k8s = env.kubernetes
    if k8s.mode != "existing":
        return
    for key, field in BOOTSTRAP_ONLY.items():
        if field in k8s.model_fields_set:
            yield Problem(
                ("kubernetes", key),
                "is ignored with kubernetes.mode 'existing' (only the kubeadm bootstrap reads it); remove it",
            )


@rule
def linked_clone_settings(env: Environment) -> Iterator[Problem]:
    if env.vm.linked_clone and not env.vcenter.template_snapshot:
        yield Problem(
            ("vcenter", "templateSnapshot"),
            "missing; vm.linkedClone clones from a snapshot of the template: name it here, or set vm.linkedClone: false",
        )


@rule
def rdma_selectors(env: Environment) -> Iterator[Problem]:
    rdma = env.rdma
    if not (rdma.vendors or rdma.device_ids or rdma.drivers):
        yield Problem(
            ("rdma",),
            "vendors, deviceIds and drivers are all empty; the RDMA shared device plugin needs at least one "
            "selector (for PVRDMA: vendors [15ad], deviceIds [0820], drivers [vmw_pvrdma])",
        )


@rule
def jobs_namespace_is_ours(env: Environment) -> Iterator[Problem]:
    namespace = env.jobs.namespace
    if namespace in PROGRAM_NAMESPACES:
        yield Problem(
            ("jobs", "namespace"),
            f"{namespace!r} is the namespace of {PROGRAM_NAMESPACES[namespace]}; the jobs get a namespace of their "
            "own (created with their Pod Security labels): pick another name, e.g. training",
        )


@rule
def training_jobs_fit_the_gpus(env: Environment) -> Iterator[Problem]:
    """Enabled jobs run at once and each holds its GPUs until it ends; without gang scheduling two
    jobs that together want more GPUs than there are can each hold some and wait forever."""
    jobs = env.jobs
    available = len(env.gpu_workers.nodes)
    if jobs.workers is not None and jobs.workers > available:
        yield Problem(("jobs", "workers"), f"{jobs.workers} worker pods but there are {available} GPU workers")
        return
    workers = jobs.workers or available
    sample = workers * jobs.sample.slots_per_worker
    # The fabric check holds every GPU of its workers (stacks/wiring/kubernetes.py: one rank per GPU).
    fabric = workers * len(env.gpu_workers.vgpu_profiles)
    gpus = available * len(env.gpu_workers.vgpu_profiles)
    if jobs.sample.enabled and jobs.fabric_check.enabled and sample + fabric > gpus:
        yield Problem(
            ("jobs",),
            f"jobs.sample and jobs.fabricCheck are both enabled and need {sample} and {fabric} GPUs at once, but "
            f"the workers have {gpus}: they could deadlock; set jobs.sample.enabled: false until the fabric "
            "check has passed (then the reverse)",
        )
    if jobs.sample.script_path is not None and jobs.sample.benchmark != "tf-cnn-benchmarks":
        yield Problem(
            ("jobs", "sample", "scriptPath"),
            "only jobs.sample.benchmark 'tf-cnn-benchmarks' reads it; remove it or switch the benchmark",
        )


@rule
def calico_supports_the_kubernetes_version(env: Environment) -> Iterator[Problem]:
    k8s = env.kubernetes
    if k8s.mode != "bootstrap":
        return
    calico_minor = int(k8s.cni.version.split(".")[1])
    kubernetes_minor = int(k8s.version.split(".")[1])
    if kubernetes_minor in POLICY and POLICY[kubernetes_minor].calico is None:
        # No pinned release is tested on it (1.37): a refusal would leave no way to run the minor;
        # validate warns instead and names what is missing (stacks.environment.version_policy).
        return
    newest = max(CALICO_TESTED_KUBERNETES)
    tested = CALICO_TESTED_KUBERNETES.get(calico_minor)
    if calico_minor > newest or (tested is not None and kubernetes_minor in tested):
        return
    # Advise a release the program pins (manifests/index.json): any other is refused for its checksum.
    fits = [
        release
        for release in pinned_releases(CALICO_OPERATOR)
        if kubernetes_minor in CALICO_TESTED_KUBERNETES.get(int(release.split(".")[1]), range(0))
    ]
    newest_fit = max(fits, key=lambda r: tuple(int(p) for p in r.lstrip("v").split(".")), default=None)
    advice = f"use {newest_fit}" if newest_fit else "use a Calico release that supports it"
    where = f"is tested on Kubernetes 1.{tested.start}-1.{tested.stop - 1}, not" if tested else "predates Kubernetes"
    yield Problem(
        ("kubernetes", "cni", "version"),
        f"Calico v3.{calico_minor} {where} 1.{kubernetes_minor} (kubernetes.version); {advice} "
        "(docs.tigera.io, System requirements for Kubernetes)",
    )
