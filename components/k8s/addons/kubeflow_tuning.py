"""Kubeflow Trainer v2 (TrainJob, with JobSet) and, optionally, Katib, from their pinned releases.

Both ship kustomize folders, not one manifest file: Trainer's `manifests/overlays/manager` (CRDs,
controller, webhook, RBAC, and JobSet v0.12.0 through a remote resource) and Katib's
`manifests/v1beta1/installs/katib-standalone` (CRDs, controller, DB manager, MySQL, UI,
webhooks). `pulumi_kubernetes.kustomize.v2.Directory` builds a git folder at a tag (its
`directory` accepts `https://github.com/<org>/<repo>/tree/<ref>/<path>`, pulumi_kubernetes
kustomize/v2/Directory.py) and applies the result server-side, as the MPI Operator's CRD is. We do
not vendor the generated CRDs (megabytes of schema); a pinned tag cannot change under us. Cost, as
for the MPI Operator: `plan` shows the folders only as URLs, and preview needs GitHub (or a mirror,
`manifest_url`).

With a mirror (`image_registry`) a third transform moves every image the folders deploy there:
the containers of their Deployments and StatefulSets, and the suggestion, early-stopping and
metrics-collector images Katib's own `katib-config` ConfigMap names (Katib's documented place for
them: manifests/v1beta1/installs/katib-standalone/katib-config.yaml). `TRAINER_IMAGES` and
`KATIB_IMAGES` list what the folders run at those releases, for `stacks images`. Images a trial
itself names (the sample's) are the stack's and are mirrored where it renders them.

Two things upstream leaves to the cluster, done here with resource transforms (which Pulumi
applies to the children of packaged components too), as pure functions with their own tests:

- **Placement.** Every upstream Deployment (trainer, jobset, katib-controller, katib-db-manager,
  katib-mysql, katib-ui) has no nodeSelector and no tolerations. Every node this stack bootstraps
  is tainted (kubeadm's control-plane taint; `nvidia.com/gpu` on GPU workers), so they would stay
  Pending and the Deployment await would fail. As the MPI Operator's controller, they run on the
  control plane: its label selected, exactly its taint tolerated.
- **Katib's DB volume.** `katib-mysql` keeps its data on the 10Gi claim `katib-mysql` with no
  StorageClass (manifests/v1beta1/components/mysql/pvc.yaml at v0.19.0), which binds only where a
  default StorageClass exists; this stack creates none. We set the class the stack names rather
  than swap in an emptyDir: the DB holds every experiment's trials and observation logs, which an
  emptyDir would lose with the pod.
- **Katib's MySQL root password.** Upstream ships the Secret `katib-mysql-secrets` with the sample
  password "test" (manifests/v1beta1/components/mysql/secret.yaml at v0.19.0), which `katib-mysql`
  initialises root with (`MYSQL_ROOT_PASSWORD`) and `katib-db-manager` connects with
  (`DB_PASSWORD`). The component generates one (pulumi-random, a Pulumi secret end to end) and
  puts it into that Secret. MySQL reads it only when it initialises an empty data directory: a DB
  created with "test" keeps it until changed by hand (docs/training-jobs.md, "Katib's database").
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
from pulumi_kubernetes.kustomize.v2 import Directory  # loaded with this module (see components/k8s/objects.py)

from components.k8s.mirror import mirrored_image
from components.k8s.objects import control_plane_selector, control_plane_toleration

TRAINER_VERSIONS = ("2.3.0",)
KATIB_VERSIONS = ("0.19.0",)


TRAINER_NAMESPACE = "kubeflow-system"
"""Where Trainer's overlay puts its controller and JobSet's (`namespace:` of the kustomization)."""
KATIB_NAMESPACE = "kubeflow"
"""Where Katib's standalone install puts its components."""
KATIB_DB_CLAIM = "katib-mysql"
KATIB_DB_SECRET = "katib-mysql-secrets"
KATIB_DB_PASSWORD_KEY = "MYSQL_ROOT_PASSWORD"
KATIB_DB_PASSWORD_LENGTH = 32

TRAINER_URL_TEMPLATE = "https://github.com/kubeflow/trainer/tree/v{version}/manifests/overlays/manager"
KATIB_URL_TEMPLATE = "https://github.com/kubeflow/katib/tree/v{version}/manifests/v1beta1/installs/katib-standalone"

TRAINER_IMAGES: Mapping[str, tuple[str, ...]] = {
    "2.3.0": (
        "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0",
        "registry.k8s.io/jobset/jobset:v0.12.0",
    )
}
"""kubeflow/trainer v2.3.0 manifests/overlays/manager: the controller (tag set by the overlay's
`images:`) and JobSet v0.12.0 (manifests/third-party/jobset's `images:` rename)."""
TRAINER_REMOTE_FILES: Mapping[str, tuple[str, ...]] = {
    "2.3.0": ("https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml",)
}
"""Release assets the Trainer overlay's kustomization includes by URL (manifests/third-party/jobset),
which no git mirror of the Trainer repository carries (manifests/index.json, not_vendored)."""
_KATIB = "ghcr.io/kubeflow/katib"
KATIB_IMAGES: Mapping[str, tuple[str, ...]] = {
    "0.19.0": (
        *(f"{_KATIB}/{name}:v0.19.0" for name in ("katib-controller", "katib-db-manager", "katib-ui")),
        "mysql:8.0.29",
        *(
            f"{_KATIB}/{name}:v0.19.0"
            for name in (
                "file-metrics-collector",
                "tfevent-metrics-collector",
                "earlystopping-medianstop",
                *(
                    f"suggestion-{a}"
                    for a in ("hyperopt", "optuna", "hyperband", "skopt", "goptuna", "enas", "darts", "pbt")
                ),
            )
        ),
    )
}
"""kubeflow/katib v0.19.0 katib-standalone: its three components (tags from the install's
`images:`), MySQL (components/mysql/mysql.yaml), and every image katib-config.yaml names."""

_DEPLOYMENT = "kubernetes:apps/v1:Deployment"
_WORKLOADS = ("kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:StatefulSet", "kubernetes:apps/v1:DaemonSet")
_CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
_IMAGE_LINE = re.compile(r"^([ \t]*image:[ \t]*)(\S+)[ \t]*$", re.M)
_CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
_SECRET = "kubernetes:core/v1:Secret"


@dataclass(frozen=True, kw_only=True)
class TrainerSettings:
    version: str = TRAINER_VERSIONS[0]
    """Release; default 2.3.0 (August 2026)."""
    manifest_url: str | None = None
    """Kustomize folder to build; default the release's `manifests/overlays/manager` on GitHub."""

    def __post_init__(self) -> None:
        if self.version not in TRAINER_VERSIONS:
            raise ValueError(f"Kubeflow Trainer {self.version!r} is not one of {', '.join(TRAINER_VERSIONS)}")

    @property
    def source(self) -> str:
        return self.manifest_url or TRAINER_URL_TEMPLATE.format(version=self.version)


@dataclass(frozen=True, kw_only=True)
class KatibSettings:
    db_storage_class: str
    """StorageClass of Katib's MySQL claim; required (see the module docstring)."""
    version: str = KATIB_VERSIONS[0]
    """Release; default 0.19.0, the first with TrainJob trials."""
    manifest_url: str | None = None
    """Kustomize folder to build; default the release's standalone install on GitHub."""

    def __post_init__(self) -> None:
        if self.version not in KATIB_VERSIONS:
            raise ValueError(f"Katib {self.version!r} is not one of {', '.join(KATIB_VERSIONS)}")
        if not self.db_storage_class:
            raise ValueError("Katib needs a StorageClass for its MySQL claim (db_storage_class)")

    @property
    def source(self) -> str:
        return self.manifest_url or KATIB_URL_TEMPLATE.format(version=self.version)


def place_on_control_plane(type_: str, props: Mapping[str, Any]) -> dict[str, Any] | None:
    """A Deployment's properties with the control plane's selector and toleration added to its
    pod template; None for anything else (left unchanged)."""
    if type_ != _DEPLOYMENT:
        return None
    patched = dict(props)
    spec = dict(patched.get("spec") or {})
    template = dict(spec.get("template") or {})
    pod = dict(template.get("spec") or {})
    pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **control_plane_selector()}
    tolerations = list(pod.get("tolerations") or [])
    if control_plane_toleration() not in tolerations:
        tolerations.append(control_plane_toleration())
    pod["tolerations"] = tolerations
    template["spec"] = pod
    spec["template"] = template
    patched["spec"] = spec
    return patched


def with_storage_class(type_: str, props: Mapping[str, Any], storage_class: str) -> dict[str, Any] | None:
    """Katib's MySQL claim with `storageClassName` set; None for anything else."""
    name = (props.get("metadata") or {}).get("name")
    if type_ != _CLAIM or name != KATIB_DB_CLAIM:
        return None
    return {**props, "spec": {**(props.get("spec") or {}), "storageClassName": storage_class}}


def with_mirrored_images(type_: str, props: Mapping[str, Any], registry: str) -> dict[str, Any] | None:
    """A workload with its pod template's images in the mirror, or a ConfigMap with the `image:`
    lines of its data (katib-config) moved there; None for anything else."""
    if type_ == _CONFIG_MAP:
        data = props.get("data") or {}
        moved = {
            key: _IMAGE_LINE.sub(lambda m: m.group(1) + mirrored_image(m.group(2), registry), value)
            for key, value in data.items()
        }
        return None if moved == data else {**props, "data": moved}
    if type_ not in _WORKLOADS:
        return None
    spec = dict(props.get("spec") or {})
    template = dict(spec.get("template") or {})
    pod = dict(template.get("spec") or {})
    for key in ("containers", "initContainers"):
        if pod.get(key):
            pod[key] = [{**c, "image": mirrored_image(c["image"], registry)} if c.get("image") else c for c in pod[key]]
    template["spec"] = pod
    spec["template"] = template
    return {**props, "spec": spec}


def _base64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def with_mysql_root_password(
    type_: str, props: Mapping[str, Any], password: str | pulumi.Output[str]
) -> dict[str, Any] | None:
    """Katib's MySQL Secret with `password` (base64, as `data` holds it) in place of upstream's
    sample; None for anything else. `password` may be a secret Output: it stays one."""
    name = (props.get("metadata") or {}).get("name")
    if type_ != _SECRET or name != KATIB_DB_SECRET:
        return None
    encoded = _base64(password) if isinstance(password, str) else password.apply(_base64)
    return {**props, "data": {**(props.get("data") or {}), KATIB_DB_PASSWORD_KEY: encoded}}


def _transform(
    storage_class: str | None, registry: str | None, db_password: pulumi.Output[str] | None = None
) -> pulumi.ResourceTransform:
    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        props = place_on_control_plane(args.type_, args.props)
        if props is None and storage_class is not None:
            props = with_storage_class(args.type_, args.props, storage_class)
        if props is None and db_password is not None:
            props = with_mysql_root_password(args.type_, args.props, db_password)
        if registry:
            props = with_mirrored_images(args.type_, props if props is not None else args.props, registry) or props
        return None if props is None else pulumi.ResourceTransformResult(props=props, opts=args.opts)

    return transform


@dataclass(frozen=True, kw_only=True)
class KubeflowTuningArgs:
    provider: k8s.Provider
    """The cluster's explicit Kubernetes provider; the only thing this component depends on."""
    trainer: TrainerSettings = field(default_factory=TrainerSettings)
    """The Trainer release; default 2.3.0 from GitHub."""
    katib: KatibSettings | None = None
    """Katib; default None (Trainer alone)."""
    image_registry: str | None = None
    """Mirror registry prefix for every image the folders deploy; default none."""


class KubeflowTuning(pulumi.ComponentResource):
    """Kubeflow Trainer (with JobSet) and, optionally, Katib. Objects of their kinds (runtimes,
    TrainJobs, Experiments) must depend on this component: the kinds exist once its CRDs do."""

    sources: list[str]
    """The kustomize folders applied."""

    def __init__(self, name: str, args: KubeflowTuningArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:KubeflowTuning", name, None, opts)
        self.sources = [args.trainer.source]
        Directory(
            f"{name}-trainer",
            directory=args.trainer.source,
            opts=pulumi.ResourceOptions(
                parent=self, provider=args.provider, transforms=[_transform(None, args.image_registry)]
            ),
        )
        if args.katib is not None:
            self.sources.append(args.katib.source)
            # Alphanumeric: upstream's probes pass it unquoted (`bash -c "mysql ... -p${MYSQL_ROOT_PASSWORD}"`).
            db_password = random.RandomPassword(
                f"{name}-katib-mysql-root",
                length=KATIB_DB_PASSWORD_LENGTH,
                special=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            Directory(
                f"{name}-katib",
                directory=args.katib.source,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=args.provider,
                    transforms=[
                        _transform(
                            args.katib.db_storage_class,
                            args.image_registry,
                            pulumi.Output.secret(db_password.result),
                        )
                    ],
                ),
            )
        self.register_outputs({"sources": self.sources})
