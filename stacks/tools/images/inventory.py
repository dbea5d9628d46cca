"""Every image and file a stack needs, as upstream publishes it and as the stack pulls it.

Images the plan shows are read from the plan of the stack *without* its mirror (the program's own
choices, upstream names); the ones it does not show come from the components that run them: the
first boot (Calico's operator and the images it deploys, kubeadm's control plane, etcd, CoreDNS and
pause, which is also containerd's sandbox), the GPU Operator's chart and
Kubeflow's folders. Each is then mapped through `mirror.registry` exactly as the program maps it
(components/k8s/mirror.py). The round trip is a test: the plan of the stack *with* its mirror runs
exactly the in-plan images' destinations (tests/stacks/test_images.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from components.k8s.addons.gpu_operator import chart_archive_url, chart_images
from components.k8s.addons.kubeflow_tuning import KATIB_IMAGES, TRAINER_IMAGES, TRAINER_REMOTE_FILES
from components.k8s.kubeadm_pins import kubeadm_pins
from components.k8s.mirror import mirrored_image, mirrored_url, parse_image
from components.k8s.node_bootstrap import CalicoSettings
from components.k8s.upgrade.versions import Version
from components.k8s.vendored import CALICO_OPERATOR, pinned
from components.k8s.version_policy import etcd_image_tag
from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, InvalidEnvironment, load_environment
from stacks.environment.model import Environment

_INSTALLATION_ONLY = (
    "node",
    "cni",
    "kube-controllers",
    "typha",
    "pod2daemon-flexvol",
    "csi",
    "node-driver-registrar",
)
CALICO_OPERATOR_MANAGED: Mapping[str, tuple[str, ...]] = {
    # Calico release: the operator release its tigera-operator.yaml runs (manifests/index.json).
    "v3.30.3": _INSTALLATION_ONLY,  # tigera/operator v1.38.6
    "v3.31.3": _INSTALLATION_ONLY,  # tigera/operator v1.40.3
    "v3.32.0": _INSTALLATION_ONLY,  # tigera/operator v1.42.0
    # tigera/operator v1.42.3 (manifests/index.json): a patch release of the v1.42 line whose
    # renderers were read at v1.42.0; not read again at v1.42.3 (no stored copy of that tag).
    "v3.32.1": _INSTALLATION_ONLY,
}
"""What tigera/operator deploys for an Installation without the optional APIServer, Goldmane or
Whisker resources, all at the Calico release's tag from `quay.io/calico/`, per Calico release: the
components the node, CSI, Typha and kube-controllers renderers resolve at each operator tag
(pkg/render/node.go, csi.go, typha.go, kubecontrollers/kube-controllers.go `GetReference`; image
names in pkg/components/calico.go, versions in config/calico_versions.yml; registry
pkg/components/images.go CalicoRegistry). The three releases agree; v3.32's new `webhooks` image
comes only with the APIServer resource (pkg/controller/apiserver). A release the stack may choose
(one with a checksum in manifests/index.json) gets its own entry after checking its operator tag:
tests/stacks/tools/images/test_calico_images.py fails until it has one."""


def calico_operator_managed(version: str) -> tuple[str, ...]:
    """The images Calico `version`'s operator deploys (names under quay.io/calico/)."""
    try:
        return CALICO_OPERATOR_MANAGED[version]
    except KeyError:
        raise InvalidEnvironment(
            [
                f"{ENVIRONMENT_KEY}.kubernetes.cni.version: Calico {version}'s operator images are not recorded "
                f"(stacks/tools/images/inventory.py CALICO_OPERATOR_MANAGED has {', '.join(CALICO_OPERATOR_MANAGED)}); "
                "choose one of those, or record the release's list from its tigera/operator tag"
            ]
        ) from None


KUBEADM_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")

KUBEADM_REGISTRY = "registry.k8s.io"

@dataclass(frozen=True)
class NeededImage:
    source: str
    """Upstream reference with its registry written out (what `skopeo copy`/`crane copy` read)."""
    dest: str
    """What the stack pulls: the mirror's reference, or the source without a mirror."""
    where: str
    """Who runs it: `plan` (an object the plan shows) or the component that deploys it."""


@dataclass(frozen=True)
class NeededFile:
    source: str
    dest: str
    where: str
    sha256: str | None = None
    """What the file at DEST must hash to (the cluster refuses other bytes); None: unchecked."""


@dataclass(frozen=True)
class Inventory:
    images: list[NeededImage]
    files: list[NeededFile]
    not_listed: tuple[str, ...] = ()
    """What the stack pulls that the list cannot name (empty: the list is the whole of it)."""


def container_images(objs: Iterable[Any]) -> Iterator[str]:
    """The image of every container, init container and ephemeral container in `objs`, at any depth
    (Deployments, MPIJob replica templates, TrainJob runtimes, ...)."""
    stack: list[Any] = list(objs)
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key in ("containers", "initContainers", "ephemeralContainers"):
                for container in value.get(key) or []:
                    if isinstance(container, dict) and isinstance(container.get("image"), str):
                        yield container["image"]
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def plan_images(view: ConfigView, *, stack: str) -> set[str]:
    """The images the objects of the stack's plan run."""
    from stacks.tools.plan.command import kubernetes_objects, run_plan  # the Pulumi SDK: only here

    run = run_plan(view, stack=stack)
    return {image for _, objs in kubernetes_objects(run.resources) for image in container_images(objs)}


def without_mirror(view: ConfigView) -> ConfigView:
    environment = dict(view.values.get(ENVIRONMENT_KEY) or {})
    environment.pop("mirror", None)
    return dataclasses.replace(view, values={**view.values, ENVIRONMENT_KEY: environment})


def _calico_operator_image(version: str) -> str:
    """The operator image the release's tigera-operator.yaml runs, as recorded with its checksum."""
    image = pinned(CALICO_OPERATOR, version).operator_image
    if image is None:
        raise ValueError(f"manifests/index.json: {CALICO_OPERATOR} {version} records no operator_image")
    return image


def outside_plan_images(env: Environment) -> list[tuple[str, str]]:
    """(image, who runs it) for what the plan does not show."""
    found: list[tuple[str, str]] = []
    if env.kubernetes.mode == "bootstrap":
        version = env.kubernetes.cni.version
        found.append((_calico_operator_image(version), "first boot: Calico's tigera-operator.yaml"))
        found += [(f"quay.io/calico/{name}:{version}", "Calico's operator") for name in calico_operator_managed(version)]
        kubernetes = Version.parse(env.kubernetes.version)
        pins = kubeadm_pins(kubernetes.minor)
        found += [(f"{KUBEADM_REGISTRY}/{name}:{kubernetes.tag}", "kubeadm") for name in KUBEADM_COMPONENTS]
        # kubeadm's GetControlPlaneImages: etcd at the stack's own tag, the stored
        # etcd.local.imageTag (components.k8s.version_policy; from etcd 3.7 on there are no
        # per-architecture tags: copy the multi-architecture manifest, `skopeo copy --all`), pause
        # at kubeadm's pin for the minor, CoreDNS at its own; the same pause is containerd's pod
        # sandbox (the bootstrap writes it).
        found.append((f"{KUBEADM_REGISTRY}/etcd:{etcd_image_tag(env.kubernetes.version)}", "kubeadm: etcd.local.imageTag"))
        found.append((f"{KUBEADM_REGISTRY}/pause:{pins.pause}", "kubeadm and containerd's pod sandbox"))
        found.append((f"{KUBEADM_REGISTRY}/coredns/coredns:{pins.coredns}", "kubeadm"))
    if env.gpu.mode == "gpu-operator":
        found += [(image, "GPU Operator chart") for image in chart_images(exporter=env.monitoring.enabled)]
    if env.tuning.enabled:
        found += [(image, "Kubeflow Trainer") for image in TRAINER_IMAGES[env.tuning.trainer.version]]
        if env.tuning.katib.enabled:
            found += [(image, "Katib") for image in KATIB_IMAGES[env.tuning.katib.version]]
    return found


def needed_files(env: Environment) -> list[NeededFile]:
    files = env.mirror.files
    found: list[NeededFile] = []
    cni = env.kubernetes.cni
    if env.kubernetes.mode == "bootstrap" and cni.operator_manifest_url is None:
        calico = CalicoSettings(version=cni.version)
        recorded = pinned(CALICO_OPERATOR, cni.version)
        found.append(
            NeededFile(
                source=calico.upstream_manifest_url,
                dest=mirrored_url(calico.upstream_manifest_url, files),
                where="first boot: the init node fetches it",
                sha256=recorded.sha256,
            )
        )
    operator = env.gpu.gpu_operator
    if env.gpu.mode == "gpu-operator" and operator is not None:
        archive = chart_archive_url(operator.chart_version)
        found.append(
            NeededFile(source=archive, dest=mirrored_url(archive, files), where="deploy: the GPU Operator chart")
        )
    if env.tuning.enabled:
        found += [
            NeededFile(
                source=url,
                dest=mirrored_url(url, files),
                where="deploy: Trainer's overlay includes it by URL; point your mirrored folder's kustomization at DEST",
            )
            for url in TRAINER_REMOTE_FILES[env.tuning.trainer.version]
        ]
    return found


def inventory(view: ConfigView, *, stack: str) -> Inventory:
    """What the stack in `view` needs; raises `InvalidEnvironment` for a stack `validate` refuses."""
    env = load_environment(view)
    registry = env.mirror.registry
    upstream = plan_images(without_mirror(view), stack=stack)
    images: dict[str, NeededImage] = {}
    for image, where in [*((i, "plan") for i in sorted(upstream)), *outside_plan_images(env)]:
        source = parse_image(image).full
        images.setdefault(
            source,
            NeededImage(source=source, dest=mirrored_image(image, registry) if registry else source, where=where),
        )
    by_dest: dict[str, list[str]] = {}
    for needed in images.values():
        by_dest.setdefault(needed.dest, []).append(needed.source)
    clashes = [sources for sources in by_dest.values() if len(sources) > 1]
    if clashes:
        # Dropping the registry host maps two upstream images onto one mirror reference.
        raise InvalidEnvironment(
            [
                f"{ENVIRONMENT_KEY}.mirror.registry: {' and '.join(sources)} would both be pulled as "
                f"{mirrored_image(sources[0], registry)}; give one of them another image (its key) or mirror "
                "it under another path by hand"
                for sources in clashes
            ]
        )
    return Inventory(images=list(images.values()), files=needed_files(env))
