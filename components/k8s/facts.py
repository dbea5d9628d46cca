"""Facts about Kubernetes that several layers check, defined once.

`stacks/` (validation), the node bootstrap and the object renderers all import these, so a pattern
or a version floor cannot drift between the check a user sees and the one a component asserts.
"""

import re

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
"""RFC 1123 label as Kubernetes validates it (`IsDNS1123Label`): at most 63 characters."""

DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""RFC 1123 subdomain (`IsDNS1123Subdomain`): labels joined by dots, at most 253 characters."""

SUPPORTED_KUBERNETES_MINORS = range(32, 36)
"""Kubernetes minors the bootstrap supports: kubeadm's `v1beta4` config needs 1.31+, and the pinned
Calico (v3.31) is tested by Tigera on 1.32 to 1.35."""

DEFAULT_CALICO_VERSION = "v3.31.3"
"""Calico release Tigera tests on Kubernetes 1.32-1.35 (v3.29, often quoted, stops at 1.32)."""

CALICO_TESTED_KUBERNETES: dict[int, range] = {
    27: range(27, 30),
    28: range(28, 31),
    29: range(29, 33),
    30: range(30, 34),
    31: range(32, 36),
}
"""Calico v3 minor to the Kubernetes minors Tigera tests it on ("System requirements for
Kubernetes", docs.tigera.io/calico/3.NN/getting-started/kubernetes/requirements; v3.29 "is tested
against Kubernetes v1.29-v1.32", projectcalico discussion 11717). A newer minor than the table
knows is let through: its own page is the authority, and it is newer than every entry here."""

DCGM_EXPORTER_VERSION = "4.6.0-4.8.3"
"""NVIDIA dcgm-exporter release (`<DCGM>-<exporter>`): the one the GPU Operator chart v26.7.0 ships
(`deployments/gpu-operator/values.yaml` `dcgmExporter.version`), so both GPU modes run the same
exporter and `stacks verify` reads the same metric names from either."""

DCGM_EXPORTER_IMAGE = f"nvcr.io/nvidia/k8s/dcgm-exporter:{DCGM_EXPORTER_VERSION}-ubuntu22.04"
"""The Ubuntu 22.04 build of that release (upstream's Makefile builds `ubuntu22.04`, `ubi9` and
`distroless` flavours; the Ubuntu one has a shell, which `kubectl exec` debugging wants)."""

PROMETHEUS_IMAGE = "quay.io/prometheus/prometheus:v3.5.3"
"""Prometheus from its long-term-support line 3.5 (prometheus.io/docs/introduction/release-cycle),
for the optional minimal Prometheus of stacks that have none."""
