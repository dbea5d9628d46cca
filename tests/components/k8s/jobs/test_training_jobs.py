"""The TrainingJobs component under the mock runtime."""

from __future__ import annotations

import os
from typing import Any

import pulumi_kubernetes as k8s
import pytest

from components.k8s.addons import MpiOperator, MpiOperatorArgs
from components.k8s.jobs import BenchmarkJob, FabricCheckJob, TrainingJobs, TrainingJobsArgs
from components.k8s.jobs.pods import WorkerShape
from components.k8s.jobs.training_jobs import render_training_namespace
from stacks.tools.plan.mock_runtime import ProgramRun, run_program
from tests.components.k8s.addons.k8s_checks import check_policy, validate_strict

os.environ["PULUMI_ERROR_OUTPUT_STRING"] = "true"


def run(build: Any) -> ProgramRun:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1\nkind: Config\n")
        build(provider)

    return run_program(program, project="vsphere-gpu-cluster", stack="test", config={}, secret_keys=[])


def with_operator(provider: k8s.Provider) -> None:
    operator = MpiOperator("mpi", MpiOperatorArgs(provider=provider))
    TrainingJobs(
        "jobs",
        TrainingJobsArgs(
            provider=provider,
            benchmark=BenchmarkJob(workers=4),
            fabric_check=FabricCheckJob(workers=4),
            depends_on=[operator],
        ),
    )


def test_jobs_are_config_groups_under_the_component_on_the_provider() -> None:
    result = run(with_operator)
    component = result.named("jobs")
    assert component.type == "gpucluster:kubernetes:TrainingJobs"
    for child in ("jobs-namespace", "jobs-benchmark", "jobs-fabric-check"):
        resource = result.named(child)
        assert resource.type == "kubernetes:yaml/v2:ConfigGroup"
        assert resource.parent == component.urn
        assert resource.provider is not None
        assert resource.provider.startswith(result.urn_of("k8s"))
    [benchmark] = result.named("jobs-benchmark").plain_inputs()["objs"]
    assert benchmark["kind"] == "MPIJob"
    assert benchmark["metadata"] == {
        "name": "tf-cnn-benchmarks-roce",
        "namespace": "training",
        "labels": benchmark["metadata"]["labels"],
    }


def test_jobs_wait_for_the_mpi_operator_crd_and_their_namespace() -> None:
    result = run(with_operator)
    for job in ("jobs-benchmark", "jobs-fabric-check"):
        dependencies = set(result.named(job).dependencies)
        assert result.urn_of("mpi-crd") in dependencies
        assert result.urn_of("jobs-namespace") in dependencies


def test_switching_transport_renames_the_jobs_so_they_run_again() -> None:
    def build(transport: str) -> Any:
        shape = WorkerShape(transport=transport)  # type: ignore[arg-type]
        return lambda p: TrainingJobs(
            "jobs",
            TrainingJobsArgs(
                provider=p,
                benchmark=BenchmarkJob(workers=2, shape=shape),
                fabric_check=FabricCheckJob(workers=2, shape=shape),
            ),
        )

    for transport in ("roce", "tcp"):
        result = run(build(transport))
        names = {
            obj["metadata"]["name"]
            for group in ("jobs-benchmark", "jobs-fabric-check")
            for obj in result.named(group).plain_inputs()["objs"]
            if obj["kind"] == "MPIJob"
        }
        assert names == {f"tf-cnn-benchmarks-{transport}", f"nccl-fabric-check-{transport}"}
        # The ConfigGroups keep their names: only the MPIJobs inside are replaced.
        assert {"jobs-benchmark", "jobs-fabric-check"} <= {r.name for r in result.resources}


def test_only_enabled_jobs_are_created() -> None:
    result = run(lambda p: TrainingJobs("jobs", TrainingJobsArgs(provider=p, fabric_check=FabricCheckJob(workers=2))))
    names = {r.name for r in result.resources}
    assert "jobs-fabric-check" in names
    assert "jobs-benchmark" not in names


def test_existing_namespace_is_not_created() -> None:
    result = run(
        lambda p: TrainingJobs(
            "jobs",
            TrainingJobsArgs(provider=p, create_namespace=False, benchmark=BenchmarkJob(workers=2)),
        )
    )
    assert "jobs-namespace" not in {r.name for r in result.resources}
    # Only the cluster provider: no namespace of ours to wait for.
    assert [result.named(d.rsplit("::", 1)[-1]).type for d in result.named("jobs-benchmark").dependencies] == [
        "pulumi:providers:kubernetes"
    ]


def test_registered_objects_are_valid_and_follow_house_rules() -> None:
    result = run(with_operator)
    [ns] = result.named("jobs-namespace").plain_inputs()["objs"]
    validate_strict(ns)
    for name in ("jobs-namespace", "jobs-benchmark", "jobs-fabric-check"):
        check_policy(result.named(name).plain_inputs()["objs"])


def test_namespace_says_why_each_transport_needs_more_than_baseline() -> None:
    from components.k8s.objects import SECURITY_EXCEPTION_ANNOTATION

    def ns(transport: str) -> dict[str, Any]:
        shape = WorkerShape(transport=transport)  # type: ignore[arg-type]
        return render_training_namespace(
            TrainingJobsArgs(provider=None, benchmark=BenchmarkJob(workers=2, shape=shape))  # type: ignore[arg-type]
        )

    for transport, reason in (("roce", "IPC_LOCK"), ("tcp", "host network")):
        namespace = ns(transport)
        labels = namespace["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
        assert labels["pod-security.kubernetes.io/warn"] == "baseline"
        assert reason in namespace["metadata"]["annotations"][SECURITY_EXCEPTION_ANNOTATION]
    assert (
        render_training_namespace(TrainingJobsArgs(provider=None))["metadata"]["labels"][  # type: ignore[arg-type]
            "pod-security.kubernetes.io/enforce"
        ]
        == "baseline"
    )


def test_pytorch_benchmark_ships_its_script_beside_the_mpijob() -> None:
    from components.k8s.jobs import PytorchDdpJob
    from components.k8s.jobs.script_files import FILES_DIR

    result = run(lambda p: TrainingJobs("jobs", TrainingJobsArgs(provider=p, benchmark=PytorchDdpJob(workers=2))))
    configmap, mpijob = result.named("jobs-benchmark").plain_inputs()["objs"]
    assert configmap["kind"] == "ConfigMap"
    assert configmap["data"]["ddp_resnet50.py"] == (FILES_DIR / "ddp_resnet50.py").read_text()
    worker = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert {
        "name": "gpucluster-scripts",
        "configMap": {"name": configmap["metadata"]["name"], "defaultMode": 0o555},
    } in (worker["volumes"])
    for obj in (configmap,):
        validate_strict(obj)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"benchmark": BenchmarkJob(workers=2, namespace="other")}, "set the job's namespace"),
        (
            {
                "benchmark": BenchmarkJob(workers=2, name="same"),
                "fabric_check": FabricCheckJob(workers=2, name="same"),
            },
            "names must differ",
        ),
        ({"namespace": "Training"}, "not a valid Kubernetes name"),
    ],
)
def test_conflicting_options_are_rejected(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainingJobsArgs(provider=None, **kwargs)  # type: ignore[arg-type]
