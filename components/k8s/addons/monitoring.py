"""GPU monitoring as one add-on: the dcgm-exporter on GPU workers and, optionally, a minimal
Prometheus. In GPU Operator mode the operator runs the exporter (configured through its chart
values, `dcgm_exporter.operator_exporter_values`), so this component then holds only Prometheus."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.k8s.addons.dcgm_exporter import DcgmExporterSettings, render_dcgm_exporter
from components.k8s.addons.prometheus import PrometheusSettings, render_prometheus
from components.k8s.objects import register_objects


@dataclass(frozen=True, kw_only=True)
class GpuMonitoringArgs:
    provider: k8s.Provider
    """The cluster's explicit Kubernetes provider; the only thing this component depends on."""
    exporter: DcgmExporterSettings | None = None
    """Our dcgm-exporter DaemonSet; None where the GPU Operator runs its own. Default None."""
    prometheus: PrometheusSettings | None = None
    """The minimal Prometheus; None (default) for stacks that scrape the exporter elsewhere."""

    def __post_init__(self) -> None:
        if self.exporter is None and self.prometheus is None:
            raise ValueError("GpuMonitoring: nothing to deploy (neither exporter nor prometheus); do not build it")
        if self.exporter is not None and self.prometheus is not None and self.exporter.scrape == "service-monitor":
            raise ValueError(
                "GpuMonitoring: the minimal Prometheus scrapes annotated pods and ignores ServiceMonitors; "
                "use scrape 'annotations' with it"
            )


class GpuMonitoring(pulumi.ComponentResource):
    """GPU health metrics for Prometheus."""

    exporter_namespace: str | None
    """Namespace of our exporter; None when the GPU Operator runs it."""
    prometheus_namespace: str | None
    """Namespace of the minimal Prometheus; None when not deployed."""

    def __init__(self, name: str, args: GpuMonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:GpuMonitoring", name, None, opts)
        self.exporter_namespace = None
        self.prometheus_namespace = None
        if args.exporter is not None:
            register_objects(
                f"{name}-exporter", render_dcgm_exporter(args.exporter), parent=self, provider=args.provider
            )
            self.exporter_namespace = args.exporter.namespace
        if args.prometheus is not None:
            register_objects(
                f"{name}-prometheus", render_prometheus(args.prometheus), parent=self, provider=args.provider
            )
            self.prometheus_namespace = args.prometheus.namespace
        self.register_outputs(
            {"exporter_namespace": self.exporter_namespace, "prometheus_namespace": self.prometheus_namespace}
        )
