"""Kubernetes rules: no privileged containers, no unpinned images, GPU limits on MPIJob workers.

Where Kubernetes objects show up:
- `kubernetes:yaml/v2:ConfigGroup` resources, in their `objs` input (the way this program
  registers every object) or `yaml` input (text), checked as a whole: this is what an offline plan
  and the ConfigGroup itself carry;
- the typed resources the ConfigGroup then registers for each object (`kubernetes:apps/v1:DaemonSet`,
  `kubernetes:kubeflow.org/v2beta1:MPIJob`, ...), whose inputs are the object itself; so in a real
  `pulumi preview` a bad container is reported on the group and again on the object's own resource.

Containers are found wherever a pod spec keeps them (`containers`, `initContainers`,
`ephemeralContainers` lists at any depth), which covers Pods, every workload kind, CronJobs and
custom resources such as MPIJobs alike, and names the exact path in each message.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from pulumi_policy import ResourceValidationArgs
from pulumi_policy.proxy import UnknownValueError

from ._common import CONFIG_GROUP_TYPE, ReportViolation, as_bool, as_list, as_number, is_list, is_mapping, short_type

CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
GPU_RESOURCE = "nvidia.com/gpu"
ALLOW_PRIVILEGED_KEY = "allowPrivilegedImages"
# Resources whose inputs are not one Kubernetes object (or are one we cannot see into).
_NOT_AN_OBJECT = (
    CONFIG_GROUP_TYPE,
    "kubernetes:yaml/v2:ConfigFile",
    "kubernetes:yaml:ConfigGroup",
    "kubernetes:yaml:ConfigFile",
    "kubernetes:helm.sh/v3:Release",
    "kubernetes:helm.sh/v4:Chart",
    "kubernetes:kustomize/v2:Directory",
    "pulumi:providers:kubernetes",
)


@dataclass(frozen=True)
class KubeObject:
    where: str
    """How a message names the object, e.g. `DaemonSet kube-system/rdma-shared-dp (objs[2] of ConfigGroup rdma)`."""
    obj: Mapping[str, Any]


def _get(mapping: Mapping[str, Any], key: str) -> Any:
    """`mapping.get(key)`, with a value unknown during a preview read as absent.

    Used only to walk towards containers, so an unknown value elsewhere in an object (a
    ConfigMap's data from an Output, say) does not stop the whole check; the fields the rules
    judge (image, privileged, limits) are read directly and stay unknown-checked.
    """
    try:
        return mapping.get(key)
    except UnknownValueError:
        return None


def _describe(obj: Mapping[str, Any], fallback_kind: str) -> str:
    kind = _get(obj, "kind") or fallback_kind
    metadata = _get(obj, "metadata")
    name = _get(metadata, "name") if is_mapping(metadata) else None
    namespace = _get(metadata, "namespace") if is_mapping(metadata) else None
    if not name:
        return str(kind)
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _expand(obj: Any) -> Iterator[Mapping[str, Any]]:
    """Objects, with `kind: *List` objects (and nested lists) opened up."""
    if is_list(obj):
        for item in obj:
            yield from _expand(item)
    elif is_mapping(obj):
        kind = _get(obj, "kind")
        items = _get(obj, "items")
        if isinstance(kind, str) and kind.endswith("List") and is_list(items):
            yield from _expand(items)
        else:
            yield obj


def kubernetes_objects(resource_type: str, name: str, props: Mapping[str, Any]) -> Iterator[KubeObject]:
    """Every Kubernetes object a resource carries: a ConfigGroup's `objs`/`yaml`, or a typed object."""
    if resource_type == CONFIG_GROUP_TYPE:
        objs = _get(props, "objs")
        for index, obj in enumerate(_expand(objs if is_list(objs) else [objs] if objs else [])):
            yield KubeObject(f"{_describe(obj, 'object')} (objs[{index}] of ConfigGroup {name})", obj)
        texts = _get(props, "yaml")
        for text_index, text in enumerate(as_list(texts) if is_list(texts) else [texts] if texts else []):
            if not isinstance(text, str):
                continue
            documents = [d for d in yaml.safe_load_all(text) if d is not None]
            for index, obj in enumerate(_expand(documents)):
                yield KubeObject(
                    f"{_describe(obj, 'object')} (yaml[{text_index}] document {index} of ConfigGroup {name})", obj
                )
        return
    if not resource_type.startswith("kubernetes:") or resource_type in _NOT_AN_OBJECT:
        return
    kind = short_type(resource_type)
    yield KubeObject(f"{kind} {name}", props)


def containers(obj: Any, path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, container) for every container of every pod template inside `obj`."""
    if is_mapping(obj):
        for key in list(obj):
            value = _get(obj, key)
            here = f"{path}.{key}" if path else str(key)
            if key in CONTAINER_LISTS and is_list(value):
                for index, container in enumerate(value):
                    if is_mapping(container):
                        yield f"{here}[{index}]", container
            elif is_mapping(value) or is_list(value):
                yield from containers(value, here)
    elif is_list(obj):
        for index, item in enumerate(obj):
            yield from containers(item, f"{path}[{index}]")


def image_repository(image: str) -> str:
    """`ghcr.io/org/img:1.2@sha256:...` -> `ghcr.io/org/img` (a registry port is not a tag)."""
    name = image.split("@", 1)[0]
    colon, slash = name.rfind(":"), name.rfind("/")
    return name[:colon] if colon > slash else name


def image_problem(image: Any) -> str | None:
    """Why an image reference is not pinned; None when it names a tag other than `latest`, or a digest."""
    if not isinstance(image, str) or not image.strip():
        return "has no image"
    name, _, digest = image.partition("@")
    if digest:
        return (
            None
            if digest.startswith("sha256:") and len(digest) > len("sha256:")
            else f"image {image!r} has a malformed digest"
        )
    colon, slash = name.rfind(":"), name.rfind("/")
    if colon <= slash:
        return f"image {image!r} has no tag, so Kubernetes pulls ':latest'; pin a version tag or a digest"
    if name[colon + 1 :] == "latest":
        return f"image {image!r} uses the tag 'latest'; pin a version tag or a digest"
    return None


def _is_privileged(container: Mapping[str, Any]) -> bool:
    context = container.get("securityContext")
    return is_mapping(context) and as_bool(context.get("privileged"))


def allowed_privileged_images(config: Mapping[str, Any]) -> set[str]:
    """The `allowPrivilegedImages` policy config: image repositories (no tag) allowed to run privileged."""
    return {image_repository(str(item)) for item in as_list(config.get(ALLOW_PRIVILEGED_KEY))}


def validate_no_privileged_containers(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """No container runs privileged, unless its image repository is in `allowPrivilegedImages` (default: none)."""
    allowed = allowed_privileged_images(args.get_config())
    for found in kubernetes_objects(args.resource_type, args.name, args.props):
        for path, container in containers(found.obj):
            if not _is_privileged(container):
                continue
            image = container.get("image")
            if isinstance(image, str) and image_repository(image) in allowed:
                continue
            report_violation(
                f"{found.where}: container {container.get('name')!r} at {path} runs privileged "
                f"(securityContext.privileged: true); grant the capabilities it needs instead "
                f"(e.g. IPC_LOCK for RDMA), or list its image repository in the policy config "
                f"{ALLOW_PRIVILEGED_KEY} with the reason in docs/policy-and-preflight.md"
            )


def validate_pinned_images(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Every container image names a version tag other than `latest`, or a digest."""
    for found in kubernetes_objects(args.resource_type, args.name, args.props):
        for path, container in containers(found.obj):
            problem = image_problem(container.get("image"))
            if problem is not None:
                report_violation(f"{found.where}: container {container.get('name')!r} at {path} {problem}")


def _is_mpijob(obj: Mapping[str, Any]) -> bool:
    api_version = _get(obj, "apiVersion")
    return _get(obj, "kind") == "MPIJob" and (
        not isinstance(api_version, str) or api_version.startswith("kubeflow.org/")
    )


def gpu_limit(container: Mapping[str, Any]) -> float | None:
    resources = container.get("resources")
    limits = resources.get("limits") if is_mapping(resources) else None
    return as_number(limits.get(GPU_RESOURCE)) if is_mapping(limits) else None


def validate_mpijob_worker_gpus(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """An MPIJob's Worker pods set a `nvidia.com/gpu` limit of at least 1 (on one of their containers).

    Without it the scheduler may put ranks on nodes with no free GPU, and the job trains on CPUs
    or fails at NCCL initialisation, long after `pulumi up` reported success.
    """
    for found in kubernetes_objects(args.resource_type, args.name, args.props):
        obj = found.obj
        if not _is_mpijob(obj):
            continue
        spec = obj.get("spec")
        replica_specs = spec.get("mpiReplicaSpecs") if is_mapping(spec) else None
        worker = replica_specs.get("Worker") if is_mapping(replica_specs) else None
        if not is_mapping(worker):
            continue
        template = worker.get("template")
        pod_spec = template.get("spec") if is_mapping(template) else None
        worker_containers = as_list(pod_spec.get("containers")) if is_mapping(pod_spec) else []
        limits = [gpu_limit(c) for c in worker_containers if is_mapping(c)]
        if not any(limit is not None and limit >= 1 for limit in limits):
            report_violation(
                f"{found.where}: no container of spec.mpiReplicaSpecs.Worker.template.spec.containers sets "
                f"resources.limits['{GPU_RESOURCE}'] of at least 1; set it to the GPUs each worker uses "
                "(its slotsPerWorker)"
            )
