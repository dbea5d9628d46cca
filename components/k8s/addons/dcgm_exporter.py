"""GPU health metrics: NVIDIA's dcgm-exporter on every GPU worker.

The DaemonSet follows upstream's Helm chart (NVIDIA/dcgm-exporter `deployment/templates/daemonset.yaml`
and `deployment/values.yaml`, release 4.5.3-4.8.2), with three deliberate differences:

- No `SYS_ADMIN`. Upstream adds it only for the profiling counters (`DCGM_FI_PROF_*`, values.yaml:
  "Required for profiling metrics"; "For non-root without profiling metrics ... remove SYS_ADMIN").
  Our counters are the standard device fields, and profiling is not available on vGPU C-series
  guests anyway; an unsupported profiling field makes the exporter exit ("Error watching fields:
  Feature not supported", NVIDIA/dcgm-exporter issue 82). So the container drops every capability
  and `health_counters` refuses `DCGM_FI_PROF_*`.
- It runs under the RuntimeClass `nvidia`: only the NVIDIA runtime mounts the driver's NVML into
  the container, and the exporter asks for no `nvidia.com/gpu`, so it sees every vGPU of the node
  without taking one from the jobs. The GPU workers' toolkit ignores the image's
  `NVIDIA_VISIBLE_DEVICES=all` in unprivileged containers (issue 40 item 8), so the exporter asks
  for every GPU with a `/dev/null` hostPath at `/var/run/nvidia-container-devices/all`
  (components/k8s/gpu_runtime.py), which needs no capability; upstream's chart has SYS_ADMIN.
- The counters are ours (a ConfigMap mounted over the file named by `-f`): utilisation, framebuffer
  used and free, the last XID error, the XIDs within the exporter's window
  (`DCGM_EXP_XID_ERRORS_COUNT`), temperature and power (which a vGPU guest does not export:
  `stacks.tools.verify.gpu` says so per node).

It still runs as uid 0 (as upstream): the kubelet's pod-resources socket, read to label each GPU
with the pod using it, is owned by root. `NODE_NAME` (upstream's chart sets it too) makes the
exporter's host label the node's name (`internal/pkg/hostname/hostname.go`), which `stacks verify`
reads.

Scraping: `scrape="annotations"` puts `prometheus.io/*` annotations on the exporter's pods (the
GPU Operator can only annotate its exporter's pods, `dcgmExporter.annotations`, so both GPU modes
use the same convention, and one target per pod keeps the node identity); `"service-monitor"`
renders a Prometheus Operator ServiceMonitor for the Service instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from components.k8s.facts import DCGM_EXPORTER_IMAGE
from components.k8s.gpu_runtime import NVIDIA_RUNTIME_CLASS, all_gpus_request
from components.k8s.objects import (
    GPU_NODE_LABEL,
    app_labels,
    check_dns_label,
    check_image,
    gpu_toleration,
    namespace,
)

Scrape = Literal["annotations", "service-monitor"]

METRICS_PORT = 9400
"""The exporter's listen port (`DCGM_EXPORTER_LISTEN=:9400`, upstream's and the operator's)."""
COUNTERS_CONFIG_MAP = "gpu-health-counters"
COUNTERS_KEY = "dcgm-metrics.csv"
"""The key the GPU Operator reads its custom counters from (controllers/object_controls.go
`MetricsConfigFileName`); used for our own ConfigMap too."""
COUNTERS_FILE = "/etc/dcgm-exporter/gpu-health.csv"
POD_RESOURCES = "/var/lib/kubelet/pod-resources"
EXPORTER_LABELS = app_labels("dcgm-exporter", "gpu-metrics")
"""Labels (and selector) of our exporter's pods; `stacks verify` finds them by these."""


@dataclass(frozen=True)
class Counter:
    """One line of the exporter's counters CSV: `field, type, help`."""

    field: str
    kind: Literal["gauge", "counter"]
    help: str


HEALTH_COUNTERS: tuple[Counter, ...] = (
    Counter("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    Counter("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    Counter("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    Counter("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    # The exporter's own per-XID count over its window (default 5 minutes); `stacks verify` judges
    # XIDs by it, since the field above keeps the last XID until the exporter restarts.
    Counter(
        "DCGM_EXP_XID_ERRORS_COUNT",
        "gauge",
        "Count of XID Errors within user-specified time window (see xid-count-window-size param).",
    ),
    Counter("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    Counter("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
)
"""What users expect of GPU health; help texts as upstream's `etc/default-counters.csv`."""


def counters_csv(counters: Sequence[Counter]) -> str:
    """The counters in the exporter's CSV format (upstream `etc/default-counters.csv`)."""
    lines = ["# DCGM field, Prometheus metric type, help message"]
    lines += [f"{c.field}, {c.kind}, {c.help}" for c in counters]
    return "\n".join(lines) + "\n"


def scrape_annotations() -> dict[str, str]:
    """The `prometheus.io/*` pod annotations the minimal Prometheus (and most others) keep."""
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT), "prometheus.io/path": "/metrics"}


@dataclass(frozen=True, kw_only=True)
class DcgmExporterSettings:
    """What the exporter's objects are rendered from (plain values only)."""

    namespace: str = "gpu-monitoring"
    """Namespace of the exporter, created here enforcing Pod Security `privileged` (hostPath of the
    kubelet's pod-resources socket); default `gpu-monitoring`, its own so the exception covers
    nothing else."""
    image: str = DCGM_EXPORTER_IMAGE
    """Exporter image, pinned; default `nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-ubuntu22.04`."""
    scrape: Scrape = "annotations"
    """annotations (default): `prometheus.io/*` on the pods; service-monitor: a ServiceMonitor
    (needs the Prometheus Operator's CRD in the cluster)."""
    counters: Sequence[Counter] = HEALTH_COUNTERS
    """Counters exported; default `HEALTH_COUNTERS`. `DCGM_FI_PROF_*` is refused (see module doc)."""
    service_monitor_labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels on the ServiceMonitor (scrape service-monitor), for the Prometheus Operator's
    `serviceMonitorSelector` (kube-prometheus-stack selects `release: <release name>`); default none."""
    node_selector: Mapping[str, str] = field(default_factory=lambda: dict(GPU_NODE_LABEL))
    """Nodes it runs on; default the GPU workers (`nvidia.com/gpu.present=true`)."""

    def __post_init__(self) -> None:
        check_dns_label(self.namespace, "dcgm-exporter namespace")
        check_image(self.image, "dcgm-exporter image")
        check_counters(self.counters)


def check_counters(counters: Sequence[Counter]) -> None:
    if not counters:
        raise ValueError("dcgm-exporter needs at least one counter")
    profiling = [c.field for c in counters if c.field.startswith("DCGM_FI_PROF_")]
    if profiling:
        raise ValueError(
            f"dcgm-exporter counters {profiling}: profiling fields need CAP_SYS_ADMIN and are not "
            "supported on vGPU C-series guests (the exporter exits on them); drop them"
        )


def render_service_monitor(
    namespace_: str, labels: Mapping[str, str], name: str, extra_labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A ServiceMonitor for the exporter's Service (monitoring.coreos.com/v1, fields as in
    prometheus-operator's CRD `monitoring.coreos.com_servicemonitors.yaml`: `selector`,
    `endpoints[].port` naming the Service port, `interval`). `extra_labels` go on the ServiceMonitor
    only (for the Prometheus's `serviceMonitorSelector`), not into its selector of the Service."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": name, "namespace": namespace_, "labels": {**labels, **(extra_labels or {})}},
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}],
        },
    }


def render_dcgm_exporter(settings: DcgmExporterSettings) -> list[dict[str, Any]]:
    """Namespace, counters ConfigMap, DaemonSet, Service (and ServiceMonitor when asked)."""
    labels = EXPORTER_LABELS
    # Every GPU of the node, asked for as the GPU workers' toolkit accepts it from an unprivileged
    # container (it ignores the image's NVIDIA_VISIBLE_DEVICES=all there): gpu_runtime.py.
    all_gpus_volume, all_gpus_mount = all_gpus_request()
    probe = {"httpGet": {"path": "/health", "port": METRICS_PORT}, "initialDelaySeconds": 45, "periodSeconds": 5}
    template_metadata: dict[str, Any] = {"labels": labels}
    if settings.scrape == "annotations":
        template_metadata["annotations"] = scrape_annotations()
    container = {
        "name": "exporter",
        "image": settings.image,
        "args": ["-f", COUNTERS_FILE],
        "env": [
            {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
            {"name": "DCGM_EXPORTER_LISTEN", "value": f":{METRICS_PORT}"},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT}],
        "securityContext": {
            "runAsNonRoot": False,
            "runAsUser": 0,
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        # Upstream chart's defaults.
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "200m", "memory": "512Mi"}},
        "livenessProbe": probe,
        "readinessProbe": probe,
        "volumeMounts": [
            {"name": "pod-gpu-resources", "mountPath": POD_RESOURCES, "readOnly": True},
            {"name": "counters", "mountPath": COUNTERS_FILE, "subPath": COUNTERS_KEY, "readOnly": True},
            all_gpus_mount,
        ],
    }
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "dcgm-exporter", "namespace": settings.namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": template_metadata,
                "spec": {
                    "nodeSelector": dict(settings.node_selector),
                    "tolerations": [gpu_toleration()],
                    # NVML (and so DCGM) is mounted only by the NVIDIA runtime. The RuntimeClass
                    # comes from the GPU add-on; until it exists the DaemonSet controller's pod
                    # creations are refused and retried, so the add-ons stay independent.
                    "runtimeClassName": NVIDIA_RUNTIME_CLASS,
                    "priorityClassName": "system-node-critical",
                    "automountServiceAccountToken": False,
                    "containers": [container],
                    "volumes": [
                        {"name": "pod-gpu-resources", "hostPath": {"path": POD_RESOURCES, "type": "Directory"}},
                        {"name": "counters", "configMap": {"name": COUNTERS_CONFIG_MAP}},
                        all_gpus_volume,
                    ],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "dcgm-exporter", "namespace": settings.namespace, "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "selector": labels,
            "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT, "protocol": "TCP"}],
        },
    }
    objs = [
        namespace(
            settings.namespace,
            enforce="privileged",
            exception_reason=(
                f"dcgm-exporter reads the kubelet's pod-resources socket through a read-only hostPath "
                f"({POD_RESOURCES}) to label GPUs with their pods, and asks the NVIDIA toolkit for every "
                "GPU with a /dev/null hostPath; the container is not privileged and drops all capabilities"
            ),
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": COUNTERS_CONFIG_MAP, "namespace": settings.namespace, "labels": labels},
            "data": {COUNTERS_KEY: counters_csv(settings.counters)},
        },
        daemonset,
        service,
    ]
    if settings.scrape == "service-monitor":
        objs.append(
            render_service_monitor(settings.namespace, labels, "dcgm-exporter", settings.service_monitor_labels)
        )
    return objs


def operator_exporter_values(
    scrape: Scrape,
    counters: Sequence[Counter] = HEALTH_COUNTERS,
    service_monitor_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """GPU Operator chart values that make its own dcgm-exporter export our counters and be scraped
    the same way (chart v26.7.0 `dcgmExporter.config` creates the ConfigMap with key
    `dcgm-metrics.csv`; `dcgmExporter.annotations` lands on the exporter's pod template,
    controllers/object_controls.go `addExtraAnnotations`; `dcgmExporter.serviceMonitor.additionalLabels`
    on its ServiceMonitor)."""
    check_counters(counters)
    monitor: dict[str, Any] = {"enabled": scrape == "service-monitor"}
    if scrape == "service-monitor" and service_monitor_labels:
        monitor["additionalLabels"] = dict(service_monitor_labels)
    values: dict[str, Any] = {
        "enabled": True,
        "config": {"name": COUNTERS_CONFIG_MAP, "create": True, "data": counters_csv(counters)},
        "serviceMonitor": monitor,
    }
    if scrape == "annotations":
        values["annotations"] = scrape_annotations()
    return {"dcgmExporter": values}
