"""The MPIJob builder against the v0.8.0 CRD, and the validator that checks it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.k8s.jobs.benchmark import BenchmarkJob, render_benchmark
from components.k8s.jobs.fabric_check import FabricCheckJob, render_fabric_check
from components.k8s.jobs.mpijob import (
    MpiJobSpec,
    ReplicaSpec,
    RunPolicy,
    mpirun_command,
    mpirun_np,
    render_mpijob,
)
from components.k8s.jobs.pods import WorkerShape
from components.k8s.jobs.pytorch_ddp import PytorchDdpJob, render_pytorch_ddp, render_pytorch_ddp_objects
from tests.components.k8s.addons.k8s_checks import check_policy, validate_strict
from tests.components.k8s.jobs.crd_schema import MPIJOB_CRD, load_crd_schema, validate

POD = {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}


def minimal(**overrides: Any) -> MpiJobSpec:
    fields: dict[str, Any] = {
        "name": "job",
        "namespace": "training",
        "launcher": ReplicaSpec(template=POD),
        "worker": ReplicaSpec(template=POD, replicas=2),
    }
    fields.update(overrides)
    return MpiJobSpec(**fields)


def rendered_jobs() -> dict[str, dict[str, Any]]:
    return {
        "minimal": render_mpijob(minimal()),
        "all-options": render_mpijob(
            minimal(
                slots_per_worker=4,
                mpi_implementation="MPICH",
                ssh_auth_mount_path="/home/mpiuser/.ssh",
                launcher_creation_policy="AtStartup",
                run_launcher_as_worker=True,
                labels={"team": "ml"},
                run_policy=RunPolicy(
                    clean_pod_policy="All",
                    backoff_limit=2,
                    ttl_seconds_after_finished=3600,
                    active_deadline_seconds=7200,
                ),
                worker=ReplicaSpec(template=POD, replicas=3, restart_policy="OnFailure"),
            )
        ),
        "benchmark-roce": render_benchmark(BenchmarkJob(workers=4)),
        "benchmark-tcp": render_benchmark(BenchmarkJob(workers=2, shape=WorkerShape(transport="tcp", gpus=2))),
        "benchmark-baked-image": render_benchmark(BenchmarkJob(workers=2, script_path="/opt/tf_cnn_benchmarks.py")),
        "fabric-roce": render_fabric_check(FabricCheckJob(workers=4)),
        "fabric-tcp": render_fabric_check(FabricCheckJob(workers=4, shape=WorkerShape(transport="tcp"))),
        "pytorch-roce": render_pytorch_ddp(PytorchDdpJob(workers=4)),
        "pytorch-tcp": render_pytorch_ddp(PytorchDdpJob(workers=2, shape=WorkerShape(transport="tcp", gpus=2))),
    }


JOBS = rendered_jobs()


@pytest.fixture(scope="module")
def crd_schema() -> dict[str, Any]:
    return load_crd_schema(MPIJOB_CRD, "v2beta1")


@pytest.mark.parametrize("which", sorted(JOBS))
def test_jobs_validate_against_the_crd_with_no_unknown_field(which: str, crd_schema: dict[str, Any]) -> None:
    assert validate(crd_schema, JOBS[which]) == []


@pytest.mark.parametrize("which", sorted(JOBS))
def test_embedded_pod_templates_are_valid_pods(which: str) -> None:
    job = JOBS[which]
    for role, replica in job["spec"]["mpiReplicaSpecs"].items():
        template = copy.deepcopy(replica["template"])
        validate_strict(
            {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": f"{job['metadata']['name']}-{role.lower()}"},
                "template": template,
            }
        )


@pytest.mark.parametrize("which", sorted(JOBS))
def test_house_rules(which: str) -> None:
    check_policy([JOBS[which]])


def test_defaults_wait_for_workers_and_clean_up_running_pods() -> None:
    spec = render_mpijob(minimal())["spec"]
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert spec["mpiImplementation"] == "OpenMPI"
    assert spec["sshAuthMountPath"] == "/root/.ssh"
    assert spec["slotsPerWorker"] == 1
    assert spec["mpiReplicaSpecs"]["Launcher"]["replicas"] == 1
    assert spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 2


def test_run_policy_fields_render_under_their_crd_names() -> None:
    policy = render_mpijob(minimal(run_policy=RunPolicy(backoff_limit=0, ttl_seconds_after_finished=60)))["spec"][
        "runPolicy"
    ]
    assert policy == {"cleanPodPolicy": "Running", "backoffLimit": 0, "ttlSecondsAfterFinished": 60}


@pytest.mark.parametrize(("workers", "slots", "np"), [(1, 1, 1), (4, 1, 4), (4, 2, 8), (3, 8, 24)])
def test_np_is_workers_times_slots(workers: int, slots: int, np: int) -> None:
    assert mpirun_np(workers, slots) == np


def test_mpirun_command_exports_variables_by_name() -> None:
    command = mpirun_command(np=8, exported_env=["A", "B"], mca=[("pml", "ob1")], program=["prog", "--x"])
    assert command[:4] == ["mpirun", "--allow-run-as-root", "-np", "8"]
    assert command[-2:] == ["prog", "--x"]
    assert command[command.index("A") - 1 : command.index("A") + 1] == ["-x", "A"]
    assert "-mca" in command and "pml" in command


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: minimal(launcher=ReplicaSpec(template=POD, replicas=2)), "exactly one launcher"),
        (lambda: ReplicaSpec(template=POD, replicas=0), "at least 1"),
        (lambda: ReplicaSpec(template={"metadata": {}}), "pod 'spec'"),
        (lambda: minimal(slots_per_worker=0), "slots_per_worker"),
        (lambda: minimal(name="Job_1"), "not a valid Kubernetes name"),
        (lambda: minimal(ssh_auth_mount_path="root/.ssh"), "absolute"),
        (lambda: RunPolicy(backoff_limit=-1), "backoff_limit"),
        (lambda: mpirun_np(0, 1), "at least one worker"),
    ],
)
def test_bad_jobs_are_rejected(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


# The validator must be able to fail, or the CRD test above proves nothing.


def test_validator_rejects_an_unknown_field(crd_schema: dict[str, Any]) -> None:
    job = copy.deepcopy(JOBS["minimal"])
    job["spec"]["slotsPerWorkers"] = 1
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    errors = validate(crd_schema, job)
    assert ".spec.slotsPerWorkers: unknown field" in errors
    assert any(e.endswith("imagePullPolicyy: unknown field") for e in errors), errors


def test_validator_rejects_a_wrong_type(crd_schema: dict[str, Any]) -> None:
    job = copy.deepcopy(JOBS["minimal"])
    job["spec"]["slotsPerWorker"] = "1"
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = True
    errors = validate(crd_schema, job)
    assert ".spec.slotsPerWorker: expected integer, got str" in errors
    assert ".spec.mpiReplicaSpecs.Worker.replicas: expected integer, got bool" in errors


def test_validator_rejects_a_bad_enum_and_a_missing_required_field(
    crd_schema: dict[str, Any],
) -> None:
    job = copy.deepcopy(JOBS["minimal"])
    job["spec"]["mpiImplementation"] = "MVAPICH"
    del job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"]
    errors = validate(crd_schema, job)
    assert any(e.startswith(".spec.mpiImplementation: 'MVAPICH' not one of") for e in errors)
    assert any(e.endswith("containers[0].name: required field missing") for e in errors), errors
    del job["spec"]["mpiReplicaSpecs"]
    assert ".spec.mpiReplicaSpecs: required field missing" in validate(crd_schema, job)


def test_validator_on_a_small_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "format": "int32"},
            "q": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    assert validate(schema, {"n": 1, "q": "1Gi", "free": {"anything": 1}, "m": {"a": "b"}}) == []
    assert validate(schema, {"n": 2**31}) == [".n: 2147483648 out of int32 range"]
    assert validate(schema, {"m": {"a": 1}}) == [".m.a: expected string, got int"]
    assert validate(schema, {"q": 1.5}) == [".q: expected integer or string, got float"]
    assert validate(schema, {"z": 1}) == [".z: unknown field"]


def test_script_configmaps_are_valid_objects() -> None:
    from components.k8s.jobs.fabric_check import render_fabric_check_objects

    for objects in (
        render_pytorch_ddp_objects(PytorchDdpJob(workers=2)),
        render_fabric_check_objects(FabricCheckJob(workers=2)),
    ):
        configmap, mpijob = objects
        validate_strict(configmap)
        mounted = [
            v["configMap"]["name"]
            for r in mpijob["spec"]["mpiReplicaSpecs"].values()
            for v in r["template"]["spec"].get("volumes", [])
            if "configMap" in v
        ]
        assert mounted == [configmap["metadata"]["name"]]
