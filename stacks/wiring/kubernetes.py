"""From the validated environment to the Kubernetes layer's component arguments (no resources)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pulumi

from components.k8s.addons.dcgm_exporter import DcgmExporterSettings, operator_exporter_values
from components.k8s.addons.device_plugin import DevicePluginSettings, GpuDevicePluginArgs
from components.k8s.addons.gpu_operator import GpuOperatorArgs
from components.k8s.addons.kubeflow_tuning import KatibSettings, KubeflowTuning, KubeflowTuningArgs, TrainerSettings
from components.k8s.addons.monitoring import GpuMonitoringArgs
from components.k8s.addons.mpi_operator import MpiOperator, MpiOperatorArgs, MpiOperatorSettings
from components.k8s.addons.prometheus import PrometheusSettings
from components.k8s.addons.rdma_plugin import RDMA_PLUGIN_IMAGE, RdmaDevicePluginArgs, RdmaPluginSettings, RdmaResource
from components.k8s.api.ready import ApiServerReadyArgs
from components.k8s.bootstrap import ClusterBootstrap, ClusterBootstrapArgs
from components.k8s.cluster_access import ClusterAccess, ClusterAccessArgs
from components.k8s.etcd.member import ControlPlaneMemberArgs
from components.k8s.jobs.benchmark import BenchmarkJob
from components.k8s.jobs.fabric_check import FabricCheckJob
from components.k8s.jobs.pods import WorkerShape
from components.k8s.jobs.pytorch_ddp import PytorchDdpJob
from components.k8s.jobs.training_jobs import TrainingJobsArgs
from components.k8s.jobs.trainjob import TuningSampleJob
from components.k8s.jobs.tuning_sample import TuningSampleArgs
from components.k8s.join.control_plane import ControlPlaneJoinSecretsArgs
from components.k8s.join.joined import NodeJoinedArgs
from components.k8s.join.token import JoinTokenArgs
from components.k8s.mirror import mirrored_image
from components.k8s.rollout.drain import NodeDrainArgs
from components.vsphere.node_pool import NodeOutputs, NodePool
from stacks.environment.cluster_spec import cluster_name, cluster_spec, control_plane_endpoint
from stacks.environment.loader import KUBECONFIG_KEY, LICENSE_TOKEN_KEY
from stacks.environment.model import Environment


def image(env: Environment, reference: str) -> str:
    """`reference` as the stack pulls it: from `mirror.registry` when one is set."""
    return mirrored_image(reference, env.mirror.registry)


def bootstrap_args(env: Environment) -> ClusterBootstrapArgs:
    return cluster_spec(env, ClusterBootstrapArgs, join_token_ttl_hours=env.kubernetes.join_token_ttl_hours)


def api_ready_args(env: Environment, bootstrap: ClusterBootstrap) -> ApiServerReadyArgs:
    """Poll the endpoint the kubeconfig names, trusting the cluster CA this stack generated, until
    the stack's admin certificate is authorised there."""
    return ApiServerReadyArgs(
        host=control_plane_endpoint(env),
        ca_certificate_pem=bootstrap.ca_certificate_pem,
        client_certificate_pem=bootstrap.admin_client_certificate_pem,
        client_key_pem=bootstrap.admin_client_key_pem,
        timeout_seconds=env.kubernetes.api_ready_timeout_minutes * 60,
    )


def api_ready_dependencies(env: Environment, control_plane: NodePool) -> list[pulumi.Resource]:
    """What the readiness wait really waits for: the VM of the node that runs `kubeadm init` (the
    first control-plane node); the others join it later, and the pool's DRS rule matters to none."""
    return [control_plane.vms[env.control_plane.nodes[0].name]]


def join_token_args(
    env: Environment,
    bootstrap: ClusterBootstrap,
    cluster: ClusterAccess,
    ready: pulumi.Resource,
    control_plane: NodePool,
) -> JoinTokenArgs:
    """The join token kubeadm registered at init expires; the stack keeps one valid from now on.
    Applied once the API is ready, deleted with the first control-plane VM (`JoinTokenArgs`)."""
    init_vm = control_plane.vms[env.control_plane.nodes[0].name]
    return JoinTokenArgs.for_bootstrap(bootstrap, cluster.kubeconfig, [ready], deleted_with=init_vm)


def control_plane_join_secrets_args(
    env: Environment,
    bootstrap: ClusterBootstrap,
    cluster: ClusterAccess,
    ready: pulumi.Resource,
    control_plane: NodePool,
) -> ControlPlaneJoinSecretsArgs | None:
    """What the joining control-plane nodes fetch (kubeadm-certs, the sealed encryption keys), with
    the join token's wait and lifetime; None with a single control-plane node."""
    init_vm = control_plane.vms[env.control_plane.nodes[0].name]
    return ControlPlaneJoinSecretsArgs.for_bootstrap(
        bootstrap, bootstrap_args(env), cluster.kubeconfig, [ready], deleted_with=init_vm
    )


def bootstrapped_cluster_args(
    env: Environment, bootstrap: ClusterBootstrap, api_up: Sequence[pulumi.Resource]
) -> ClusterAccessArgs:
    return ClusterAccessArgs.for_bootstrap(bootstrap, api_up, cluster_identifier=cluster_name(env))


def existing_cluster_args(env: Environment) -> ClusterAccessArgs:
    """Access to an existing cluster whose kubeconfig is the stack secret."""
    kubeconfig = pulumi.Config().require_secret(KUBECONFIG_KEY.split(":", 1)[1])
    return ClusterAccessArgs.for_existing_cluster(kubeconfig, cluster_identifier=cluster_name(env))


def node_drain_args(
    env: Environment, node_name: str, vm_id: pulumi.Input[str], cluster: ClusterAccess
) -> NodeDrainArgs:
    """The guard that drains a GPU worker's node before its VM is deleted or replaced."""
    return NodeDrainArgs(
        node_name=node_name,
        vm_id=vm_id,
        kubeconfig=cluster.kubeconfig,
        timeout_seconds=env.kubernetes.drain_timeout_minutes * 60,
    )


def node_joined_args(
    env: Environment, node_name: str, node: NodeOutputs, bootstrap: ClusterBootstrap, *, control_plane: bool
) -> NodeJoinedArgs:
    """The wait for a node VM's join (its first-boot secrets leave vCenter before, once its guest
    read them: `GuestinfoScrub`). The kubeconfig is the bootstrap's (it does not wait for the VMs); the wait
    is the rollout's."""
    return NodeJoinedArgs(
        node_name=node_name,
        vm_id=node.vm_id,
        control_plane=control_plane,
        kubeconfig=bootstrap.kubeconfig,
        timeout_seconds=env.kubernetes.rollout_timeout_minutes * 60,
    )


def control_plane_member_args(
    env: Environment, node_name: str, vm_id: pulumi.Input[str], bootstrap: ClusterBootstrap, cluster: ClusterAccess
) -> ControlPlaneMemberArgs:
    """The guard that drains a control-plane node and removes its etcd member (through another
    control-plane node's etcd, quorum checked) before its VM is deleted or replaced."""
    addresses = {node.name: str(node.management_ip) for node in env.control_plane.nodes}
    return ControlPlaneMemberArgs(
        node_name=node_name,
        node_address=addresses[node_name],
        vm_id=vm_id,
        other_addresses=[address for name, address in addresses.items() if name != node_name],
        kubeconfig=cluster.kubeconfig,
        etcd_ca_pem=bootstrap.etcd_ca_certificate_pem,
        etcd_client_cert_pem=bootstrap.etcd_client_certificate_pem,
        etcd_client_key_pem=bootstrap.etcd_client_key_pem,
        timeout_seconds=env.kubernetes.drain_timeout_minutes * 60,
    )


def _secret_config(key: str) -> pulumi.Output[str]:
    namespace, name = key.split(":", 1)
    return pulumi.Config(namespace).require_secret(name)


def gpu_support_args(env: Environment, cluster: ClusterAccess) -> GpuDevicePluginArgs:
    """GPUs for pods: NVIDIA's device plugin, or the GPU Operator with the vGPU guest driver."""
    gpu = env.gpu
    operator = None
    if gpu.mode == "gpu-operator" and gpu.gpu_operator is not None:
        settings = gpu.gpu_operator
        operator = GpuOperatorArgs(
            provider=cluster.provider,
            driver_repository=settings.driver_repository,
            driver_version=settings.driver_version,
            licensing_token=_secret_config(LICENSE_TOKEN_KEY),
            gridd_conf=settings.gridd_conf,
            chart_version=settings.chart_version,
            extra_values=operator_monitoring_values(env),
            image_registry=env.mirror.registry,
            chart_files=env.mirror.files,
        )
    return GpuDevicePluginArgs(
        provider=cluster.provider,
        mode=gpu.mode,
        device_plugin=DevicePluginSettings(image=image(env, gpu.device_plugin_image))
        if operator is None
        else DevicePluginSettings(),
        gpu_operator=operator,
    )


def operator_monitoring_values(env: Environment) -> dict[str, Any]:
    """The GPU Operator runs the dcgm-exporter itself: export our counters and publish them the way
    `monitoring.scrape` says, or switch it off with `monitoring.enabled: false` (the chart enables it
    by default)."""
    monitoring = env.monitoring
    if not monitoring.enabled:
        return {"dcgmExporter": {"enabled": False}}
    return operator_exporter_values(monitoring.scrape, service_monitor_labels=monitoring.service_monitor_labels)


def monitoring_args(env: Environment, cluster: ClusterAccess) -> GpuMonitoringArgs | None:
    """Our dcgm-exporter (device-plugin mode) and the optional minimal Prometheus; None when
    neither is wanted."""
    monitoring = env.monitoring
    exporter = None
    if monitoring.enabled and env.gpu.mode == "device-plugin":
        exporter = DcgmExporterSettings(
            image=image(env, monitoring.exporter_image),
            scrape=monitoring.scrape,
            service_monitor_labels=monitoring.service_monitor_labels,
        )
    prometheus = None
    if monitoring.prometheus.enabled:
        settings = monitoring.prometheus
        prometheus = PrometheusSettings(
            image=image(env, settings.image),
            retention_hours=settings.retention_hours,
            storage_limit_gi=settings.storage_limit_gi,
        )
    if exporter is None and prometheus is None:
        return None
    return GpuMonitoringArgs(
        provider=cluster.provider,
        exporter=exporter,
        prometheus=prometheus,
        api_server_addresses=[str(node.management_ip) for node in env.control_plane.nodes],
    )


def rdma_support_args(env: Environment, cluster: ClusterAccess) -> RdmaDevicePluginArgs:
    """The PVRDMA device advertised to pods as `<resourcePrefix>/<resourceName>`."""
    rdma = env.rdma
    resource = RdmaResource(
        resource_name=rdma.resource_name,
        resource_prefix=rdma.resource_prefix,
        rdma_hca_max=rdma.hca_max,
        vendors=tuple(rdma.vendors),
        device_ids=tuple(rdma.device_ids),
        drivers=tuple(rdma.drivers),
    )
    return RdmaDevicePluginArgs(
        provider=cluster.provider,
        settings=RdmaPluginSettings(resources=(resource,), image=image(env, RDMA_PLUGIN_IMAGE)),
    )


def mpi_operator_args(env: Environment, cluster: ClusterAccess) -> MpiOperatorArgs:
    operator = env.mpi_operator
    settings = MpiOperatorSettings(
        version=operator.version,
        crd_url=operator.crd_url,
        placement=operator.placement,
        image=image(env, MpiOperatorSettings(version=operator.version).controller_image),
    )
    return MpiOperatorArgs(provider=cluster.provider, settings=settings)


def training_jobs_args(env: Environment, cluster: ClusterAccess, operator: MpiOperator) -> TrainingJobsArgs | None:
    """The sample benchmark and the fabric check, over the one transport switch."""
    jobs = env.jobs
    if not (jobs.sample.enabled or jobs.fabric_check.enabled):
        return None
    workers = jobs.workers or len(env.gpu_workers.nodes)
    shape = WorkerShape(
        gpus=jobs.sample.slots_per_worker,
        shm_size=jobs.sample.shm_size,
        transport=jobs.transport,
        rdma_resource=f"{env.rdma.resource_prefix}/{env.rdma.resource_name}",
    )
    extra_env = dict(jobs.extra_env)
    sample = jobs.sample
    benchmark: BenchmarkJob | PytorchDdpJob | None = None
    if sample.enabled and sample.benchmark == "pytorch-ddp":
        benchmark = PytorchDdpJob(
            workers=workers,
            namespace=jobs.namespace,
            shape=shape,
            extra_env=extra_env,
            batch_size=sample.batch_size,
            steps=sample.num_batches,
        )
    elif sample.enabled:
        benchmark = BenchmarkJob(
            workers=workers,
            namespace=jobs.namespace,
            shape=shape,
            extra_env=extra_env,
            model=sample.model,
            batch_size=sample.batch_size,
            num_batches=sample.num_batches,
        )
        if sample.script_path:
            benchmark = dataclasses.replace(benchmark, script_path=sample.script_path)
    # The sample's own image, else the site image (PyTorch sample only: the legacy one needs
    # Horovod), else the job's default; from the mirror when one is set.
    site_image = jobs.site_image if isinstance(benchmark, PytorchDdpJob) else None
    if benchmark is not None:
        benchmark = dataclasses.replace(benchmark, image=image(env, sample.image or site_image or benchmark.image))
    fabric = None
    if jobs.fabric_check.enabled:
        check = jobs.fabric_check
        fabric = FabricCheckJob(
            workers=workers,
            namespace=jobs.namespace,
            # Every GPU of each worker, one rank each (issue 54: one GPU per pod left half of each
            # worker's GPUs idle and let the scheduler pack the pods onto half the hosts).
            shape=dataclasses.replace(shape, gpus=len(env.gpu_workers.vgpu_profiles)),
            extra_env=extra_env,
            link_gbps=check.link_gbps,
            min_bus_share=check.min_bus_bandwidth_share,
        )
        fabric = dataclasses.replace(fabric, image=image(env, check.image or jobs.site_image or fabric.image))
    return TrainingJobsArgs(
        provider=cluster.provider,
        namespace=jobs.namespace,
        benchmark=benchmark,
        fabric_check=fabric,
        gpus_available=len(env.gpu_workers.nodes) * len(env.gpu_workers.vgpu_profiles),
        node_networks=[str(env.management_network.subnet), str(env.rdma_network.subnet)],
        # MPIJob is a custom resource: it exists only once the operator's CRD is installed.
        depends_on=[operator],
    )


def kubeflow_tuning_args(env: Environment, cluster: ClusterAccess) -> KubeflowTuningArgs | None:
    """Kubeflow Trainer and (by default) Katib; None unless `tuning.enabled`."""
    tuning = env.tuning
    if not tuning.enabled:
        return None
    trainer = TrainerSettings(version=tuning.trainer.version, manifest_url=tuning.trainer.manifest_url)
    katib = None
    if tuning.katib.enabled:
        # validate refuses Katib without a StorageClass (rules_tuning.py); "" would fail here too.
        katib = KatibSettings(
            version=tuning.katib.version,
            db_storage_class=tuning.katib.db_storage_class or "",
            manifest_url=tuning.katib.manifest_url,
        )
    return KubeflowTuningArgs(
        provider=cluster.provider, trainer=trainer, katib=katib, image_registry=env.mirror.registry
    )


def tuning_sample_args(env: Environment, cluster: ClusterAccess, tuning: KubeflowTuning) -> TuningSampleArgs | None:
    """The sample Experiment (or TrainJob), shaped like the MPIJobs' workers."""
    settings = env.tuning
    if not (settings.enabled and settings.sample.enabled):
        return None
    sample = settings.sample
    shape = WorkerShape(
        gpus=len(env.gpu_workers.vgpu_profiles),
        transport=env.jobs.transport,
        rdma_resource=f"{env.rdma.resource_prefix}/{env.rdma.resource_name}",
    )
    job = TuningSampleJob(
        namespace=settings.namespace,
        shape=shape,
        image=image(env, sample.image),
        nodes=sample.nodes,
        batch_sizes=tuple(sample.batch_sizes),
        steps=sample.steps,
        katib=settings.katib.enabled,
        max_trials=sample.max_trials,
        parallel_trials=sample.parallel_trials,
        extra_env=dict(env.jobs.extra_env),
    )
    # The runtime, TrainJob and Experiment kinds exist once the component's CRDs do.
    return TuningSampleArgs(provider=cluster.provider, job=job, depends_on=[tuning])
