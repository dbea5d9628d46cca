"""Kubeflow MPI Operator (kubeflow.org/v2beta1 MPIJob), release v0.8.2.

Upstream ships one manifest, `deploy/v2beta1/mpi-operator.yaml`: the MPIJob CRD followed by the
Namespace, ServiceAccount, ClusterRoles (incl. the kubeflow aggregate roles), ClusterRoleBinding
and the controller Deployment. We install it in two parts, on purpose:

- **The CRD** is the CRD document of upstream's `deploy/v2beta1/mpi-operator.yaml` at v0.8.0, as
  the project's shared/reference provides it, vendored in this repository (`manifests/`, with its
  URL and SHA-256: vendored.py; 0.8.2 has the same v2beta1 schema, so one copy serves both), handed
  to `pulumi_kubernetes.yaml.v2.ConfigFile` as a local file: preview and deploy fetch nothing, and a
  copy whose checksum does not match is refused before it is applied. The provider applies it
  server-side (the explicit provider enables server-side apply; the CRD's ~750 kB schema is too
  large for client-side apply's last-applied annotation). The path is relative to the project
  directory, where the engine starts the provider (pulumi/pulumi
  sdk/go/common/resource/plugin/plugin.go: a provider process gets `cmd.Dir = pwd`, the program's
  directory), so the input is the same on every machine. `crd_url` still points the provider at another
  copy (a URL it then fetches, unchecked).
- **Everything else** is rendered here as dicts mirroring the upstream manifest (same names,
  labels, RBAC rules, args), so `plan` shows it and the tests validate it, and so we can add what
  upstream leaves out: Pod Security labels on the namespace (`restricted`), a restricted
  securityContext for the controller (non-root, read-only root filesystem, no capabilities), and
  a deliberate place to run.

Where the controller runs: upstream's Deployment has no nodeSelector and no tolerations. In a
cluster this stack bootstraps every node is tainted (kubeadm's
`node-role.kubernetes.io/control-plane:NoSchedule` on the control plane, `nvidia.com/gpu:NoSchedule`
on GPU workers by default), so upstream's pod would stay Pending, Pulumi's Deployment await would
fail after 10 minutes, and the MPIJobs that wait on this component would never be created. By
default the controller runs on the control plane: it selects kubeadm's control-plane label and
tolerates exactly its taint (the home the GPU Operator and NFD charts choose for their
controllers too); it never competes with training pods for a GPU worker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.yaml.v2 import ConfigFile  # loaded with this module (see components/k8s/objects.py)

from components.k8s.network_policy import deny_all_ingress
from components.k8s.objects import (
    check_dns_label,
    check_image,
    control_plane_selector,
    control_plane_toleration,
    namespace,
    register_objects,
)
from components.k8s.vendored import MPI_OPERATOR_CRD, REPO_ROOT, pinned

MPI_OPERATOR_VERSION = "0.8.2"
# Labels upstream's kustomization puts on every object (and on the Deployment's selector).
UPSTREAM_LABELS = {
    "app": "mpi-operator",
    "app.kubernetes.io/component": "mpijob",
    "app.kubernetes.io/name": "mpi-operator",
    "kustomize.component": "mpi-operator",
}
NONROOT_UID = 65532
"""The `nonroot` user of the distroless base image the operator is built on."""

Placement = Literal["control-plane", "any-node"]


@dataclass(frozen=True, kw_only=True)
class MpiOperatorSettings:
    """What the operator's objects are rendered from (plain values only)."""

    version: str = MPI_OPERATOR_VERSION
    """Release; selects the image tag and the CRD file. Default 0.8.2 (July 2026: launcher fixes,
    the same kubeflow.org/v2beta1 CRD as 0.8.0)."""
    image: str | None = None
    """Controller image; default `mpioperator/mpi-operator:<version>`."""
    namespace: str = "mpi-operator"
    """Namespace of the controller (also its leader-election lock namespace), enforcing Pod
    Security `restricted`; default `mpi-operator`, upstream's."""
    install_crd: bool = True
    """Install the MPIJob CRD; default True. False when something else owns it."""
    crd_url: str | None = None
    """Where the provider fetches the CRD manifest; default none: the vendored copy of the release's
    file (`manifests/`), read locally and checked against its SHA-256."""
    placement: Placement = "control-plane"
    """Where the controller runs. control-plane (default): nodeSelector
    `node-role.kubernetes.io/control-plane: ""` and a toleration of exactly kubeadm's control-plane
    taint; it never takes room on a GPU worker, but needs kubeadm-style control-plane nodes that
    accept pods (not so on managed clusters, whose control plane is hidden). any-node: no
    nodeSelector, the same toleration: the scheduler picks any node whose taints it tolerates (a
    control-plane node, or an untainted worker); use it for an existing cluster without visible
    control-plane nodes."""

    def __post_init__(self) -> None:
        check_dns_label(self.namespace, "MPI Operator namespace")
        if self.version in ("", "latest", "master"):
            raise ValueError("MpiOperator: pin version (e.g. '0.8.2')")
        if self.placement not in ("control-plane", "any-node"):
            raise ValueError(f"MpiOperator: placement must be 'control-plane' or 'any-node', got {self.placement!r}")
        check_image(self.controller_image, "MPI Operator image")

    @property
    def node_selector(self) -> Mapping[str, str]:
        return control_plane_selector() if self.placement == "control-plane" else {}

    @property
    def tolerations(self) -> Sequence[Mapping[str, str]]:
        return [control_plane_toleration()]

    @property
    def controller_image(self) -> str:
        return self.image or f"mpioperator/mpi-operator:{self.version}"

    @property
    def crd_source(self) -> str:
        """`crd_url`, else the vendored file's path (relative to the project directory), after
        checking its checksum (`ManifestChecksumError` otherwise)."""
        if self.crd_url:
            return self.crd_url
        manifest = pinned(MPI_OPERATOR_CRD, self.version)
        manifest.verified_bytes()
        return manifest.file.relative_to(REPO_ROOT).as_posix()


def _meta(name: str, namespace_: str | None = None, **extra_labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**UPSTREAM_LABELS, **extra_labels}}
    if namespace_:
        meta["namespace"] = namespace_
    return meta


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def operator_rules() -> list[dict[str, Any]]:
    """The controller's ClusterRole rules, as in upstream's release manifest."""
    return [
        _rule([""], ["configmaps", "secrets", "services"], ["create", "list", "watch", "update"]),
        _rule([""], ["pods"], ["create", "get", "list", "watch", "delete", "update", "patch"]),
        # Needed for the launcher Role.
        _rule([""], ["pods/exec"], ["create"]),
        _rule([""], ["endpoints"], ["create", "get", "update"]),
        _rule([""], ["events"], ["create", "patch"]),
        _rule(["batch"], ["jobs"], ["create", "list", "update", "watch"]),
        _rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], ["create", "get"]),
        _rule(["kubeflow.org"], ["mpijobs", "mpijobs/finalizers", "mpijobs/status"], ["*"]),
        _rule(["coordination.k8s.io"], ["leases"], ["*"]),
        _rule(
            ["scheduling.incubator.k8s.io", "scheduling.sigs.dev", "scheduling.volcano.sh"],
            ["queues", "podgroups"],
            ["*"],
        ),
        _rule(["scheduling.x-k8s.io"], ["podgroups"], ["*"]),
        _rule(["scheduling.k8s.io"], ["priorityclasses"], ["get", "list", "watch"]),
    ]


def render_mpi_operator(settings: MpiOperatorSettings) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, ClusterRoles, ClusterRoleBinding and Deployment."""
    ns = settings.namespace
    mpijob_resources = ["mpijobs", "mpijobs/status"]
    read_verbs = ["get", "list", "watch"]
    return [
        namespace(ns, enforce="restricted", labels=UPSTREAM_LABELS),
        # The operator only calls the API server; nothing connects to it.
        deny_all_ingress(ns),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta("mpi-operator", ns)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(
                "kubeflow-mpijobs-admin",
                **{"rbac.authorization.kubeflow.org/aggregate-to-kubeflow-admin": "true"},
            ),
            "aggregationRule": {
                "clusterRoleSelectors": [
                    {"matchLabels": {"rbac.authorization.kubeflow.org/aggregate-to-kubeflow-mpijobs-admin": "true"}}
                ]
            },
            "rules": [],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(
                "kubeflow-mpijobs-edit",
                **{
                    "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-edit": "true",
                    "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-mpijobs-admin": "true",
                },
            ),
            "rules": [
                _rule(
                    ["kubeflow.org"],
                    mpijob_resources,
                    [*read_verbs, "create", "delete", "deletecollection", "patch", "update"],
                )
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(
                "kubeflow-mpijobs-view",
                **{"rbac.authorization.kubeflow.org/aggregate-to-kubeflow-view": "true"},
            ),
            "rules": [_rule(["kubeflow.org"], mpijob_resources, read_verbs)],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta("mpi-operator"),
            "rules": operator_rules(),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta("mpi-operator"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "mpi-operator",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "mpi-operator", "namespace": ns}],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta("mpi-operator", ns),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": dict(UPSTREAM_LABELS)},
                "template": {
                    "metadata": {
                        "labels": dict(UPSTREAM_LABELS),
                        "annotations": {"sidecar.istio.io/inject": "false"},
                    },
                    "spec": {
                        "serviceAccountName": "mpi-operator",
                        # Not in upstream: a deliberate place (see the module docstring).
                        **({"nodeSelector": dict(settings.node_selector)} if settings.node_selector else {}),
                        "tolerations": [dict(t) for t in settings.tolerations],
                        # Not in upstream: Pod Security "restricted". The image runs as root by
                        # default but needs nothing root can do.
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": NONROOT_UID,
                            "runAsGroup": NONROOT_UID,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "mpi-operator",
                                "image": settings.controller_image,
                                "args": ["-alsologtostderr", f"--lock-namespace={ns}"],
                                "securityContext": {
                                    "privileged": False,
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                # klog may write log files under the temp dir.
                                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                            }
                        ],
                        "volumes": [{"name": "tmp", "emptyDir": {}}],
                    },
                },
            },
        },
    ]


@dataclass(frozen=True, kw_only=True)
class MpiOperatorArgs:
    provider: k8s.Provider
    """The cluster's explicit Kubernetes provider; the only thing this component depends on."""
    settings: MpiOperatorSettings = field(default_factory=MpiOperatorSettings)
    """What to deploy; defaults as documented on `MpiOperatorSettings` (v0.8.2 on the control
    plane, CRD included)."""


class MpiOperator(pulumi.ComponentResource):
    """The MPI Operator and, by default, its MPIJob CRD.

    Jobs that create MPIJobs must depend on this component: the MPIJob kind does not exist until
    the CRD is installed (depending on a component waits for all of its children).
    """

    namespace: str
    crd_source: str | None
    """The file (or URL) the CRD was installed from; None when `install_crd` is False."""

    def __init__(self, name: str, args: MpiOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:MpiOperator", name, None, opts)
        settings = args.settings
        crd: list[pulumi.Resource] = []
        self.crd_source = None
        if settings.install_crd:
            self.crd_source = settings.crd_source
            crd.append(
                ConfigFile(
                    f"{name}-crd",
                    file=settings.crd_source,
                    opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
                )
            )
        register_objects(
            f"{name}-objects",
            render_mpi_operator(settings),
            parent=self,
            provider=args.provider,
            # The controller lists MPIJobs at start; give it the CRD first.
            depends_on=crd,
        )
        self.namespace = settings.namespace
        self.register_outputs({"namespace": self.namespace, "crd_source": self.crd_source})
