"""GPU monitoring as one add-on: the dcgm-exporter on GPU workers and, optionally, a minimal
Prometheus. In GPU Operator mode the operator runs the exporter (configured through its chart
values, `dcgm_exporter.operator_exporter_values`), so this component then holds only Prometheus."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.k8s.addons.dcgm_exporter import (
    EXPORTER_LABELS,
    METRICS_PORT,
    DcgmExporterSettings,
    render_dcgm_exporter,
)
from components.k8s.addons.prometheus import PROMETHEUS_LABELS, PrometheusSettings, render_prometheus
from components.k8s.network_policy import allow_ingress_on, deny_all_ingress, hosts, pods_in
from components.k8s.objects import register_objects


@dataclass(frozen=True, kw_only=True)
class GpuMonitoringArgs:
    provider: k8s.Provider
    """The cluster's explicit Kubernetes provider; the only thing this component depends on."""
    exporter: DcgmExporterSettings | None = None
    """Our dcgm-exporter DaemonSet; None where the GPU Operator runs its own. Default None."""
    prometheus: PrometheusSettings | None = None
    """The minimal Prometheus; None (default) for stacks that scrape the exporter elsewhere."""
    api_server_addresses: Sequence[str] = ()
    """Addresses of the control-plane nodes: the API server's pod proxy (`stacks verify` reads the
    exporter through it) connects from there. Default none."""

    def __post_init__(self) -> None:
        if self.exporter is None and self.prometheus is None:
            raise ValueError("GpuMonitoring: nothing to deploy (neither exporter nor prometheus); do not build it")
        if self.exporter is not None and self.prometheus is not None and self.exporter.scrape == "service-monitor":
            raise ValueError(
                "GpuMonitoring: the minimal Prometheus scrapes annotated pods and ignores ServiceMonitors; "
                "use scrape 'annotations' with it"
            )


def render_monitoring_network_policies(args: GpuMonitoringArgs) -> list[dict[str, Any]]:
    """The exporter answers on its metrics port only, and only to our Prometheus (when deployed)
    and the API server's pod proxy; Prometheus accepts no connection over the pod network (its UI
    is reached with `kubectl port-forward`). With an external Prometheus the exporter's port stays
    open to the pod network, since where that one scrapes from is not known here."""
    objs: list[dict[str, Any]] = []
    if args.exporter is not None:
        sources = None
        if args.prometheus is not None:
            sources = [pods_in(args.prometheus.namespace, PROMETHEUS_LABELS), *hosts(args.api_server_addresses)]
        objs.append(
            allow_ingress_on(
                args.exporter.namespace,
                "dcgm-exporter-metrics-only",
                pods=EXPORTER_LABELS,
                port=METRICS_PORT,
                sources=sources,
            )
        )
        objs.append(deny_all_ingress(args.exporter.namespace))
    if args.prometheus is not None:
        objs.append(deny_all_ingress(args.prometheus.namespace))
    return objs


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
        created: list[pulumi.Resource] = []
        if args.exporter is not None:
            created.append(
                register_objects(
                    f"{name}-exporter", render_dcgm_exporter(args.exporter), parent=self, provider=args.provider
                )
            )
            self.exporter_namespace = args.exporter.namespace
        if args.prometheus is not None:
            created.append(
                register_objects(
                    f"{name}-prometheus", render_prometheus(args.prometheus), parent=self, provider=args.provider
                )
            )
            self.prometheus_namespace = args.prometheus.namespace
        register_objects(
            f"{name}-network-policies",
            render_monitoring_network_policies(args),
            parent=self,
            provider=args.provider,
            depends_on=created,
        )
        self.register_outputs(
            {"exporter_namespace": self.exporter_namespace, "prometheus_namespace": self.prometheus_namespace}
        )
