"""Kubernetes add-ons for distributed GPU training: GPUs and RDMA for pods, the MPI Operator, and
GPU health monitoring.

Each add-on is a component taking the cluster's explicit provider and nothing else, so none waits
on another; their objects are rendered by pure functions (tested without Pulumi) and registered
through ConfigGroups.
"""

from components.k8s.addons.dcgm_exporter import DcgmExporterSettings
from components.k8s.addons.device_plugin import (
    DevicePluginSettings,
    GpuDevicePlugin,
    GpuDevicePluginArgs,
)
from components.k8s.addons.gpu_operator import GpuOperator, GpuOperatorArgs
from components.k8s.addons.monitoring import GpuMonitoring, GpuMonitoringArgs
from components.k8s.addons.mpi_operator import MpiOperator, MpiOperatorArgs, MpiOperatorSettings
from components.k8s.addons.prometheus import PrometheusSettings
from components.k8s.addons.rdma_plugin import (
    RdmaDevicePlugin,
    RdmaDevicePluginArgs,
    RdmaPluginSettings,
    RdmaResource,
)

__all__ = [
    "DcgmExporterSettings",
    "DevicePluginSettings",
    "GpuDevicePlugin",
    "GpuDevicePluginArgs",
    "GpuMonitoring",
    "GpuMonitoringArgs",
    "GpuOperator",
    "GpuOperatorArgs",
    "MpiOperator",
    "MpiOperatorArgs",
    "MpiOperatorSettings",
    "PrometheusSettings",
    "RdmaDevicePlugin",
    "RdmaDevicePluginArgs",
    "RdmaPluginSettings",
    "RdmaResource",
]
