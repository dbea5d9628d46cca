"""Kubernetes add-ons for distributed GPU training: GPUs and RDMA for pods, and the MPI Operator.

Each add-on is a component taking the cluster's explicit provider and nothing else, so none waits
on another; their objects are rendered by pure functions (tested without Pulumi) and registered
through ConfigGroups.
"""

from components.k8s.addons.device_plugin import (
    DevicePluginSettings,
    GpuDevicePlugin,
    GpuDevicePluginArgs,
)
from components.k8s.addons.gpu_operator import GpuOperator, GpuOperatorArgs
from components.k8s.addons.mpi_operator import MpiOperator, MpiOperatorArgs, MpiOperatorSettings
from components.k8s.addons.rdma_plugin import (
    RdmaDevicePlugin,
    RdmaDevicePluginArgs,
    RdmaPluginSettings,
    RdmaResource,
)

__all__ = [
    "DevicePluginSettings",
    "GpuDevicePlugin",
    "GpuDevicePluginArgs",
    "GpuOperator",
    "GpuOperatorArgs",
    "MpiOperator",
    "MpiOperatorArgs",
    "MpiOperatorSettings",
    "RdmaDevicePlugin",
    "RdmaDevicePluginArgs",
    "RdmaPluginSettings",
    "RdmaResource",
]
