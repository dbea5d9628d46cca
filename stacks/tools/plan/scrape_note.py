"""What `plan` says about scraping the GPU metrics through a ServiceMonitor: which selector of the
user's Prometheus must match it.

A Prometheus run by the Prometheus Operator scrapes only the ServiceMonitors its
`serviceMonitorSelector` matches, in the namespaces its `serviceMonitorNamespaceSelector` matches
(prometheus-operator `Documentation/api-reference`, PrometheusSpec); kube-prometheus-stack sets the
selector to `release: <its Helm release name>` unless
`prometheus.prometheusSpec.serviceMonitorSelectorNilUsesHelmValues` is false. A ServiceMonitor
nothing selects is created and never scraped, so `plan` names the labels it carries.
"""

from __future__ import annotations

from components.k8s.addons.dcgm_exporter import DcgmExporterSettings
from components.k8s.addons.gpu_operator import GpuOperatorArgs
from stacks.environment.model import Environment

KUBE_PROMETHEUS_STACK = "kube-prometheus-stack selects `release: <its Helm release name>`"


def scrape_lines(env: Environment) -> list[str]:
    """The scraping note, or nothing when no ServiceMonitor is rendered."""
    monitoring = env.monitoring
    if not monitoring.enabled or monitoring.scrape != "service-monitor":
        return []
    if env.gpu.mode == "gpu-operator":
        where = f"the GPU Operator's dcgm-exporter ServiceMonitor (namespace {GpuOperatorArgs.namespace})"
    else:
        where = f"ServiceMonitor {DcgmExporterSettings.namespace}/dcgm-exporter"
    namespaces = "and its serviceMonitorNamespaceSelector that namespace"
    labels = monitoring.service_monitor_labels
    if labels:
        written = ", ".join(f"{key}: {value}" for key, value in sorted(labels.items()))
        return [
            f"scraping: {where} carries {written} (monitoring.serviceMonitorLabels): your Prometheus's "
            f"serviceMonitorSelector must match them, {namespaces} ({KUBE_PROMETHEUS_STACK})"
        ]
    return [
        f"scraping: {where} carries no label for a Prometheus to select it by: your Prometheus's "
        f"serviceMonitorSelector must match it, {namespaces}; {KUBE_PROMETHEUS_STACK}, so set "
        "monitoring.serviceMonitorLabels (e.g. release: kube-prometheus-stack) or it is never scraped"
    ]
