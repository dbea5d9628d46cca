"""The `monitoring` settings: GPU health metrics (dcgm-exporter) and an optional minimal Prometheus."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.k8s.facts import DCGM_EXPORTER_IMAGE, PROMETHEUS_IMAGE
from stacks.environment.base import Model
from stacks.environment.fields import LabelKey, LabelValue, PinnedImage


class PrometheusSettings(Model):
    enabled: bool = False
    """Deploy a minimal Prometheus (one replica on the control plane, read-only RBAC, data in an
    emptyDir) that scrapes annotated pods; default false: most sites scrape from their own."""
    image: PinnedImage = PROMETHEUS_IMAGE
    """Prometheus image, pinned; default quay.io/prometheus/prometheus:v3.5.3 (LTS line)."""
    retention_hours: int = Field(default=24, ge=1, le=24 * 90)
    """How long samples are kept; default 24."""
    storage_limit_gi: int = Field(default=4, ge=1, le=1024)
    """Size limit of the emptyDir holding the data, in GiB; default 4 (Prometheus keeps itself
    below 80 % of it, the kubelet evicts the pod above it)."""


class Monitoring(Model):
    enabled: bool = True
    """Export GPU health (utilisation, framebuffer, XID errors, temperature, power) with NVIDIA's
    dcgm-exporter on every GPU worker; default true (about 100m CPU and 128Mi per GPU node). In
    gpu.mode gpu-operator the operator's own exporter is configured instead."""
    exporter_image: PinnedImage = DCGM_EXPORTER_IMAGE
    """dcgm-exporter image, pinned (gpu.mode device-plugin only; the GPU Operator pins its own);
    default nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-ubuntu22.04."""
    scrape: Literal["annotations", "service-monitor"] = "annotations"
    """How Prometheus finds the exporter: annotations (prometheus.io/* on its pods) or
    service-monitor (a Prometheus Operator ServiceMonitor; its CRD must be in the cluster)."""
    service_monitor_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Labels on the ServiceMonitor (scrape service-monitor only), for the Prometheus Operator's
    `serviceMonitorSelector`: a Prometheus scrapes only the ServiceMonitors its selector matches,
    and kube-prometheus-stack's selects `release: <its Helm release name>` by default
    (`prometheus.prometheusSpec.serviceMonitorSelectorNilUsesHelmValues`). Default none:
    `plan` says which selector the ServiceMonitor must then match."""
    prometheus: PrometheusSettings = PrometheusSettings()
    """The optional minimal Prometheus."""
