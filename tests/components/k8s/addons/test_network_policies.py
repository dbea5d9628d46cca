"""Issue 37 items 3 and 8: who may connect to the add-ons' pods over the pod network.

Connections are judged from the rendered objects with NetworkPolicy's semantics
(kubernetes.io/docs/concepts/services-networking/network-policies): a pod no Ingress policy selects
accepts everything; a selected pod accepts a connection when some policy selecting it has a rule
whose ports and peers match (policies add up; an omitted `from` or `ports` matches all).
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from components.k8s.addons.dcgm_exporter import (
    EXPORTER_LABELS,
    METRICS_PORT,
    DcgmExporterSettings,
    render_dcgm_exporter,
)
from components.k8s.addons.device_plugin import DevicePluginSettings, render_device_plugin
from components.k8s.addons.monitoring import GpuMonitoringArgs, render_monitoring_network_policies
from components.k8s.addons.mpi_operator import MpiOperatorSettings, render_mpi_operator
from components.k8s.addons.prometheus import PROMETHEUS_LABELS, PROMETHEUS_PORT, PrometheusSettings, render_prometheus
from tests.components.k8s.addons.k8s_checks import validate_strict

CONTROL_PLANE = ["10.10.0.11", "10.10.0.12"]
Source = dict[str, Any]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _peer_matches(peer: dict[str, Any], source: Source) -> bool:
    if "ipBlock" in peer:
        return "ip" in source and ipaddress.ip_address(source["ip"]) in ipaddress.ip_network(peer["ipBlock"]["cidr"])
    if "ip" in source:
        return False  # a node, not a pod: only ipBlock peers match it
    if "namespaceSelector" in peer and not _selects(
        peer["namespaceSelector"], {"kubernetes.io/metadata.name": source["namespace"]}
    ):
        return False
    if "namespaceSelector" not in peer and source["namespace"] != peer.get("_policy_namespace"):
        return False
    return _selects(peer.get("podSelector", {}), source.get("labels", {}))


def connects(
    objects: list[dict[str, Any]], *, namespace: str, labels: dict[str, str], port: int, source: Source
) -> bool:
    policies = [
        o
        for o in objects
        if o["kind"] == "NetworkPolicy"
        and o["metadata"]["namespace"] == namespace
        and "Ingress" in o["spec"]["policyTypes"]
        and _selects(o["spec"]["podSelector"], labels)
    ]
    if not policies:
        return True
    for policy in policies:
        for rule in policy["spec"].get("ingress", []):
            ports = rule.get("ports")
            if ports is not None and not any(p["port"] == port for p in ports):
                continue
            peers = [{**p, "_policy_namespace": namespace} for p in rule.get("from", [])]
            if "from" not in rule or any(_peer_matches(p, source) for p in peers):
                return True
    return False


def monitoring(prometheus: bool = True) -> list[dict[str, Any]]:
    exporter = DcgmExporterSettings()
    settings = PrometheusSettings() if prometheus else None
    args = GpuMonitoringArgs(
        provider=None,  # type: ignore[arg-type]
        exporter=exporter,
        prometheus=settings,
        api_server_addresses=CONTROL_PLANE,
    )
    objects = render_dcgm_exporter(exporter) + (render_prometheus(settings) if settings else [])
    return objects + render_monitoring_network_policies(args)


A_JOB_POD: Source = {"namespace": "training", "labels": {"gpucluster.io/mpi-role": "worker"}}
PROMETHEUS_POD: Source = {"namespace": "prometheus", "labels": PROMETHEUS_LABELS}
EXPORTER = {"namespace": "gpu-monitoring", "labels": EXPORTER_LABELS}


def test_the_exporter_answers_only_prometheus_and_the_api_servers_proxy() -> None:
    objects = monitoring()
    assert connects(objects, **EXPORTER, port=METRICS_PORT, source=PROMETHEUS_POD)
    for address in CONTROL_PLANE:  # `stacks verify` reads it through the pod proxy
        assert connects(objects, **EXPORTER, port=METRICS_PORT, source={"ip": address})
    assert not connects(objects, **EXPORTER, port=METRICS_PORT, source=A_JOB_POD)
    assert not connects(objects, **EXPORTER, port=METRICS_PORT, source={"ip": "10.10.0.51"})  # a worker node
    assert not connects(objects, **EXPORTER, port=5555, source=PROMETHEUS_POD)  # nothing but metrics


def test_prometheus_accepts_no_connection_over_the_pod_network() -> None:
    objects = monitoring()
    prometheus = {"namespace": "prometheus", "labels": PROMETHEUS_LABELS}
    for source in (A_JOB_POD, {"namespace": "gpu-monitoring", "labels": EXPORTER_LABELS}, {"ip": CONTROL_PLANE[0]}):
        assert not connects(objects, **prometheus, port=PROMETHEUS_PORT, source=source)


def test_with_an_external_prometheus_the_exporter_keeps_only_its_metrics_port_open() -> None:
    objects = monitoring(prometheus=False)
    assert connects(objects, **EXPORTER, port=METRICS_PORT, source=A_JOB_POD)
    assert not connects(objects, **EXPORTER, port=5555, source=A_JOB_POD)


@pytest.mark.parametrize(
    ("objects", "namespace"),
    [
        (render_mpi_operator(MpiOperatorSettings()), MpiOperatorSettings().namespace),
        (render_device_plugin(DevicePluginSettings()), DevicePluginSettings().namespace),
    ],
    ids=["mpi-operator", "nvidia-device-plugin"],
)
def test_add_ons_that_only_call_out_accept_nothing(objects: list[dict[str, Any]], namespace: str) -> None:
    assert not connects(objects, namespace=namespace, labels={"any": "pod"}, port=443, source=A_JOB_POD)


def test_the_policies_are_valid_objects() -> None:
    objects = monitoring() + render_mpi_operator(MpiOperatorSettings()) + render_device_plugin(DevicePluginSettings())
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert len(policies) == 5
    for policy in policies:
        validate_strict(policy)
