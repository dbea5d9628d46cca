"""Kubernetes policies: privileged containers, unpinned images, GPU limits of MPIJob workers.

Objects are checked as typed resources (their inputs are the object) and inside ConfigGroups'
`objs` (how this program registers every object) and `yaml`.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policy.gpucluster_policy._common import CONFIG_GROUP_TYPE
from policy.gpucluster_policy.kubernetes import (
    image_problem,
    image_repository,
    validate_mpijob_worker_gpus,
    validate_no_privileged_containers,
    validate_pinned_images,
)

DAEMONSET_TYPE = "kubernetes:apps/v1:DaemonSet"
MPIJOB_TYPE = "kubernetes:kubeflow.org/v2beta1:MPIJob"
RDMA_IMAGE = "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.2"


def daemonset(image: str = RDMA_IMAGE, privileged: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "rdma-shared-dp", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "rdma"}},
            "template": {
                "metadata": {"labels": {"app": "rdma"}},
                "spec": {
                    "initContainers": [{"name": "init", "image": "busybox:1.36.1"}],
                    "containers": [{"name": "plugin", "image": image, "securityContext": {"privileged": privileged}}],
                },
            },
        },
    }


def mpijob(worker_limits: dict[str, Any] | None = None) -> dict[str, Any]:
    worker_container: dict[str, Any] = {"name": "worker", "image": "horovod/horovod:0.28.1"}
    if worker_limits is not None:
        worker_container["resources"] = {"limits": worker_limits}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "tf-resnet50", "namespace": "training"},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "launcher", "image": "horovod/horovod:0.28.1"}]}},
                },
                "Worker": {"replicas": 4, "template": {"spec": {"containers": [worker_container]}}},
            },
        },
    }


# --- images --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "problem"),
    [
        ("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", None),
        ("registry.local:5000/team/img:1.0", None),
        ("busybox@sha256:" + "a" * 64, None),
        ("busybox:latest@sha256:" + "a" * 64, None),
        ("busybox", "has no tag"),
        ("registry.local:5000/team/img", "has no tag"),
        ("busybox:latest", "uses the tag 'latest'"),
        ("", "has no image"),
        (None, "has no image"),
    ],
)
def test_image_problem(image: Any, problem: str | None) -> None:
    found = image_problem(image)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_image_repository_keeps_registry_port() -> None:
    assert image_repository("registry.local:5000/team/img:1.0@sha256:abc") == "registry.local:5000/team/img"
    assert image_repository("busybox") == "busybox"


def test_pinned_images_pass_in_typed_resource(resource_args, collector) -> None:
    validate_pinned_images(resource_args(DAEMONSET_TYPE, daemonset(), name="rdma-ds"), collector)
    assert collector.reported == []


def test_latest_image_fails_in_typed_resource(resource_args, collector) -> None:
    validate_pinned_images(
        resource_args(DAEMONSET_TYPE, daemonset(image="ghcr.io/x/plugin:latest"), name="rdma-ds"), collector
    )
    assert collector.messages == [
        "DaemonSet rdma-ds: container 'plugin' at spec.template.spec.containers[0] image "
        "'ghcr.io/x/plugin:latest' uses the tag 'latest'; pin a version tag or a digest"
    ]


def test_untagged_image_fails_inside_config_group(resource_args, collector) -> None:
    objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}}, daemonset(image="busybox")]
    validate_pinned_images(resource_args(CONFIG_GROUP_TYPE, {"objs": objs}, name="rdma"), collector)
    assert collector.messages == [
        "DaemonSet kube-system/rdma-shared-dp (objs[1] of ConfigGroup rdma): container 'plugin' at "
        "spec.template.spec.containers[0] image 'busybox' has no tag, so Kubernetes pulls ':latest'; "
        "pin a version tag or a digest"
    ]


def test_unpinned_image_fails_in_config_group_yaml_and_cronjob(resource_args, collector) -> None:
    text = """
apiVersion: batch/v1
kind: CronJob
metadata: {name: cleanup, namespace: ops}
spec:
  schedule: "0 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: clean, image: "alpine"}]
          restartPolicy: Never
"""
    validate_pinned_images(resource_args(CONFIG_GROUP_TYPE, {"yaml": text}, name="ops"), collector)
    assert len(collector.messages) == 1
    assert collector.messages[0].startswith(
        "CronJob ops/cleanup (yaml[0] document 0 of ConfigGroup ops): container 'clean' at "
        "spec.jobTemplate.spec.template.spec.containers[0] image 'alpine' has no tag"
    )


def test_unpinned_init_container_fails(resource_args, collector) -> None:
    obj = daemonset()
    obj["spec"]["template"]["spec"]["initContainers"][0]["image"] = "busybox:latest"
    validate_pinned_images(resource_args(DAEMONSET_TYPE, obj, name="ds"), collector)
    assert [m.split(" image ")[0] for m in collector.messages] == [
        "DaemonSet ds: container 'init' at spec.template.spec.initContainers[0]"
    ]


# --- privileged ---------------------------------------------------------------------------------


def test_unprivileged_container_passes(resource_args, collector) -> None:
    validate_no_privileged_containers(resource_args(DAEMONSET_TYPE, daemonset(), name="ds"), collector)
    assert collector.reported == []


def test_privileged_container_fails_in_typed_resource(resource_args, collector) -> None:
    validate_no_privileged_containers(resource_args(DAEMONSET_TYPE, daemonset(privileged=True), name="ds"), collector)
    assert len(collector.messages) == 1
    assert collector.messages[0].startswith(
        "DaemonSet ds: container 'plugin' at spec.template.spec.containers[0] runs privileged"
    )


def test_privileged_container_fails_inside_config_group(resource_args, collector) -> None:
    objs = [daemonset(privileged=True)]
    validate_no_privileged_containers(resource_args(CONFIG_GROUP_TYPE, {"objs": objs}, name="rdma"), collector)
    assert len(collector.messages) == 1
    assert collector.messages[0].startswith("DaemonSet kube-system/rdma-shared-dp (objs[0] of ConfigGroup rdma)")


def test_privileged_mpijob_worker_fails(resource_args, collector) -> None:
    job = mpijob({"nvidia.com/gpu": 1})
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["securityContext"] = {
        "privileged": True
    }
    validate_no_privileged_containers(resource_args(CONFIG_GROUP_TYPE, {"objs": [job]}, name="jobs"), collector)
    assert len(collector.messages) == 1
    assert "at spec.mpiReplicaSpecs.Worker.template.spec.containers[0] runs privileged" in collector.messages[0]


def test_allow_list_admits_a_privileged_image_repository(resource_args, collector) -> None:
    config = {"allowPrivilegedImages": ["ghcr.io/mellanox/k8s-rdma-shared-dev-plugin"]}
    args = resource_args(DAEMONSET_TYPE, daemonset(privileged=True), name="ds", config=config)
    validate_no_privileged_containers(args, collector)
    assert collector.reported == []
    other = resource_args(
        DAEMONSET_TYPE, daemonset(image="ghcr.io/evil/plugin:1.0", privileged=True), name="ds", config=config
    )
    validate_no_privileged_containers(other, collector)
    assert len(collector.reported) == 1


def test_non_kubernetes_resources_are_ignored(resource_args, collector) -> None:
    args = resource_args("vsphere:index/virtualMachine:VirtualMachine", {"containers": [{"image": "x"}]})
    validate_pinned_images(args, collector)
    validate_no_privileged_containers(args, collector)
    assert collector.reported == []


def test_crd_schemas_are_not_mistaken_for_containers(resource_args, collector) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "mpijobs.kubeflow.org"},
        "spec": {"versions": [{"schema": {"openAPIV3Schema": {"properties": {"containers": {"type": "array"}}}}}]},
    }
    validate_pinned_images(resource_args(CONFIG_GROUP_TYPE, {"objs": [crd]}, name="crds"), collector)
    assert collector.reported == []


# --- MPIJob GPU limits --------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, "1", 2])
def test_mpijob_worker_with_gpu_limit_passes(resource_args, collector, limit: Any) -> None:
    validate_mpijob_worker_gpus(resource_args(MPIJOB_TYPE, mpijob({"nvidia.com/gpu": limit}), name="job"), collector)
    validate_mpijob_worker_gpus(
        resource_args(CONFIG_GROUP_TYPE, {"objs": [mpijob({"nvidia.com/gpu": limit})]}, name="jobs"), collector
    )
    assert collector.reported == []


@pytest.mark.parametrize("limits", [None, {}, {"nvidia.com/gpu": 0}, {"cpu": "4", "rdma/pvrdma": 1}])
def test_mpijob_worker_without_gpu_limit_fails(resource_args, collector, limits: Any) -> None:
    validate_mpijob_worker_gpus(resource_args(MPIJOB_TYPE, mpijob(limits), name="job"), collector)
    validate_mpijob_worker_gpus(resource_args(CONFIG_GROUP_TYPE, {"objs": [mpijob(limits)]}, name="jobs"), collector)
    assert collector.messages == [
        "MPIJob job: no container of spec.mpiReplicaSpecs.Worker.template.spec.containers sets "
        "resources.limits['nvidia.com/gpu'] of at least 1; set it to the GPUs each worker uses (its slotsPerWorker)",
        "MPIJob training/tf-resnet50 (objs[0] of ConfigGroup jobs): no container of "
        "spec.mpiReplicaSpecs.Worker.template.spec.containers sets resources.limits['nvidia.com/gpu'] of at "
        "least 1; set it to the GPUs each worker uses (its slotsPerWorker)",
    ]


def test_gpu_request_without_limit_fails(resource_args, collector) -> None:
    job = mpijob()
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"nvidia.com/gpu": 1}
    }
    validate_mpijob_worker_gpus(resource_args(MPIJOB_TYPE, job, name="job"), collector)
    assert len(collector.reported) == 1


def test_launcher_needs_no_gpu(resource_args, collector) -> None:
    job = copy.deepcopy(mpijob({"nvidia.com/gpu": 1}))
    assert "resources" not in job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    validate_mpijob_worker_gpus(resource_args(MPIJOB_TYPE, job, name="job"), collector)
    assert collector.reported == []
