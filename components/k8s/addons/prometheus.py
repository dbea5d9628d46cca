"""A minimal Prometheus for stacks that have none: one replica on the control plane, read-only RBAC.

It scrapes exactly what carries the `prometheus.io/scrape: "true"` pod annotation (the convention
of Prometheus's own example `documentation/examples/prometheus-kubernetes.yml`, job
`kubernetes-pods`), which is how both GPU modes publish the dcgm-exporter (dcgm_exporter.py). Its
data lives in an `emptyDir` (size-limited): a restart loses history. It is a place to look at GPU
health during bring-up, not a monitoring system; stacks with one set `monitoring.prometheus.enabled:
false` and scrape the exporter from there.

RBAC: the `kubernetes_sd_configs` role `pod` lists and watches pods, nothing else (get/list/watch on
`pods`, cluster-wide, since the exporter and the jobs live in different namespaces).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from components.k8s.facts import PROMETHEUS_IMAGE
from components.k8s.objects import (
    app_labels,
    check_dns_label,
    check_image,
    control_plane_selector,
    control_plane_toleration,
    namespace,
)

PROMETHEUS_PORT = 9090
NOBODY = 65534
"""The uid the upstream image runs as (`USER nobody` in its Dockerfile)."""
CONFIG_MAP = "prometheus-config"
PROMETHEUS_LABELS = app_labels("prometheus", "metrics-server")
"""Labels (and selector) of Prometheus's pods; its scrapes come from these (monitoring.py)."""


@dataclass(frozen=True, kw_only=True)
class PrometheusSettings:
    namespace: str = "prometheus"
    """Namespace, created here enforcing Pod Security `restricted`; default `prometheus`."""
    image: str = PROMETHEUS_IMAGE
    """Pinned image; default `quay.io/prometheus/prometheus:v3.5.3` (LTS line)."""
    retention_hours: int = 24
    """How long samples are kept (`--storage.tsdb.retention.time`); default 24."""
    storage_limit_gi: int = 4
    """Size limit of the `emptyDir` holding the TSDB, in GiB; default 4 (the kubelet evicts the
    pod above it, so Prometheus also caps its own size at 80 % of it)."""

    def __post_init__(self) -> None:
        check_dns_label(self.namespace, "Prometheus namespace")
        check_image(self.image, "Prometheus image")
        if self.retention_hours < 1:
            raise ValueError("Prometheus retention_hours must be at least 1")
        if self.storage_limit_gi < 1:
            raise ValueError("Prometheus storage_limit_gi must be at least 1")


def scrape_config(interval_s: int = 15) -> dict[str, Any]:
    """prometheus.yml: annotated pods only, labelled with namespace, pod and node."""
    return {
        "global": {"scrape_interval": f"{interval_s}s"},
        "scrape_configs": [
            {
                "job_name": "kubernetes-pods",
                "kubernetes_sd_configs": [{"role": "pod"}],
                "relabel_configs": [
                    {
                        "source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"],
                        "action": "keep",
                        "regex": "true",
                    },
                    {
                        "source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_path"],
                        "action": "replace",
                        "target_label": "__metrics_path__",
                        "regex": "(.+)",
                    },
                    {
                        "source_labels": ["__address__", "__meta_kubernetes_pod_annotation_prometheus_io_port"],
                        "action": "replace",
                        "regex": r"([^:]+)(?::\d+)?;(\d+)",
                        "replacement": "$1:$2",
                        "target_label": "__address__",
                    },
                    {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                    {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                    {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
                ],
            }
        ],
    }


def render_prometheus(settings: PrometheusSettings) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, ClusterRole(+Binding), ConfigMap, Deployment, Service."""
    labels = PROMETHEUS_LABELS
    ns = settings.namespace
    name = "prometheus"
    size_bytes = settings.storage_limit_gi * 1024**3 * 8 // 10
    probe_port = {"port": PROMETHEUS_PORT}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 1,
            # One TSDB directory: never two pods writing it during a rollout.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": name,
                    "nodeSelector": control_plane_selector(),
                    "tolerations": [control_plane_toleration()],
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": NOBODY,
                        "runAsGroup": NOBODY,
                        "fsGroup": NOBODY,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "prometheus",
                            "image": settings.image,
                            "args": [
                                "--config.file=/etc/prometheus/prometheus.yml",
                                "--storage.tsdb.path=/prometheus",
                                f"--storage.tsdb.retention.time={settings.retention_hours}h",
                                f"--storage.tsdb.retention.size={size_bytes}B",
                            ],
                            "ports": [{"name": "web", "containerPort": PROMETHEUS_PORT}],
                            "readinessProbe": {"httpGet": {"path": "/-/ready", **probe_port}},
                            "livenessProbe": {"httpGet": {"path": "/-/healthy", **probe_port}},
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "256Mi"},
                                "limits": {"memory": "1Gi"},
                            },
                            "securityContext": {
                                "privileged": False,
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {"name": "config", "mountPath": "/etc/prometheus", "readOnly": True},
                                {"name": "data", "mountPath": "/prometheus"},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "config", "configMap": {"name": CONFIG_MAP}},
                        {"name": "data", "emptyDir": {"sizeLimit": f"{settings.storage_limit_gi}Gi"}},
                    ],
                },
            },
        },
    }
    return [
        namespace(ns, enforce="restricted"),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns, "labels": labels}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"{ns}-{name}", "labels": labels},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{ns}-{name}", "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{ns}-{name}"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "namespace": ns, "labels": labels},
            # JSON is YAML: Prometheus reads it as prometheus.yml.
            "data": {"prometheus.yml": json.dumps(scrape_config(), indent=2, sort_keys=True) + "\n"},
        },
        deployment,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "type": "ClusterIP",
                "selector": labels,
                "ports": [{"name": "web", "port": PROMETHEUS_PORT, "targetPort": PROMETHEUS_PORT, "protocol": "TCP"}],
            },
        },
    ]
