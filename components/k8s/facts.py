"""Facts about Kubernetes that several layers check, defined once.

`stacks/` (validation), the node bootstrap and the object renderers all import these, so a pattern
or a version floor cannot drift between the check a user sees and the one a component asserts.
"""

import re
from collections.abc import Mapping

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
"""RFC 1123 label as Kubernetes validates it (`IsDNS1123Label`): at most 63 characters."""

DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""RFC 1123 subdomain (`IsDNS1123Subdomain`): labels joined by dots, at most 253 characters."""

SUPPORTED_KUBERNETES_MINORS = range(32, 38)
"""Kubernetes minors the bootstrap supports: kubeadm's `v1beta4` config needs 1.31+ and is still served
in 1.37: the 1.37 cycle removed v1beta3 and added `v1` as a placeholder copy of v1beta4
(kubernetes/kubernetes#136016, as kubernetes/kubeadm#3311 describes it), so no field this program
writes changed; 1.32 and 1.33
stay for clusters that upgrade from them (past their end of life: validate warns). Each has its
entry in `components.k8s.version_policy` (end of life, etcd, Calico, containerd)."""

DEFAULT_CALICO_VERSION = "v3.31.3"
"""Calico release Tigera tests on Kubernetes 1.32-1.35 (v3.29, often quoted, stops at 1.32)."""

CALICO_TESTED_KUBERNETES: dict[int, range] = {
    27: range(27, 30),
    28: range(28, 31),
    29: range(29, 33),
    30: range(30, 34),
    31: range(32, 36),
    32: range(34, 37),
    33: range(35, 38),
}
"""Calico v3 minor to the Kubernetes minors Tigera tests it on ("System requirements for
Kubernetes", docs.tigera.io/calico/3.NN/getting-started/kubernetes/requirements; v3.29 "is tested
against Kubernetes v1.29-v1.32", projectcalico discussion 11717; v3.32 on 1.34-1.36 and v3.33 on
1.35-1.37 from the 3.32 and 3.33 pages as Rusty-Gopher/kupre v0.5.0's release notes quote them). A newer minor than the table
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

PYTORCH_IMAGE = "nvcr.io/nvidia/pytorch:25.06-py3"
"""NVIDIA's PyTorch image of the PyTorch benchmark and the tuning sample (components.k8s.jobs.
pytorch_ddp says why this release); here so the settings models can default to it without
importing the job renderers (and with them Pulumi)."""

TRAINER_TESTED_KUBERNETES: Mapping[str, range] = {"2.3.0": range(32, 36)}
"""Minors upstream's e2e runs on (kubeflow/trainer v2.3.0 .github/workflows/test-e2e.yaml:
1.32.3, 1.33.1, 1.34.0, 1.35.0; docs/operator-guides/installation.md asks for >= 1.31)."""
TRAINER_RUNS_ON_KUBERNETES: Mapping[str, range] = {"2.3.0": range(32, 37)}
"""Minors a release runs on: its tested ones, and up to the minor of the Kubernetes client libraries
it is built with (2.3.0: release-2.3 go.mod `k8s.io/api v0.36.2`; Trainer moved to 0.36 in
release-2.2). `validate` warns on a minor here but not tested (1.36): master added 1.36.1 and 1.37.0
to the e2e matrix after 2.3.0 (kubeflow/trainer#4007, 2026-08-30), and 1.37's libraries need code
changes (#4005), so 1.37 is refused until a release built for it is pinned."""
TRAINER_NEWEST_RELEASE = "2.3.0"
"""Upstream's newest Trainer release in the stored sources (tag v2.3.0, 2026-08-06; the repository
snapshot of 2026-08-21 has no v2.4 tag, and no release note of a 2.4.0 is stored)."""
KATIB_TESTED_KUBERNETES: Mapping[str, range] = {"0.19.0": range(31, 35)}
"""Minors upstream's e2e runs on (kubeflow/katib v0.19.0 .github/workflows/e2e-test-*.yaml:
v1.31.3, v1.32.2, v1.33.1, v1.34.0; built with go.mod `k8s.io/api v0.34.0`, so these are also the
minors it runs on). Katib 0.18 predates TrainJob trials (added by #2560, first released in 0.19.0:
`TrainJob.v1alpha1.trainer.kubeflow.org` in katib-config's trialResources)."""
KATIB_RUNS_ON_KUBERNETES: Mapping[str, range] = KATIB_TESTED_KUBERNETES
KATIB_NEWEST_RELEASE = "0.19.0"
"""Upstream's newest Katib release (tag v0.19.0; the repository snapshot of 2026-06-22 has no later
tag, and its master still tests 1.31-1.34)."""

GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource the NVIDIA device plugin (or the GPU Operator's) advertises per GPU."""
