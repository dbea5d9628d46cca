"""Issue 26.3: Kubeflow Trainer v2 + Katib, off by default, with a sample Experiment whose trials
are TrainJobs shaped like the MPIJobs' workers, admitted by `plan`.

No upstream CRD is vendored (CI has no internet): the objects' structure is checked against the
fields of the upstream Go types at the pinned tags (cited per set below); every core object and
every pod template is validated strictly with kubernetes-validate.
"""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest

from components.k8s.addons.kubeflow_tuning import (
    KATIB_NAMESPACE,
    KatibSettings,
    TrainerSettings,
    place_on_control_plane,
    with_mysql_root_password,
    with_storage_class,
)
from components.k8s.jobs.pods import WorkerShape, worker_template
from components.k8s.jobs.trainjob import TuningSampleJob, render_experiment, render_runtime, render_tuning_objects
from components.k8s.jobs.transport import nccl_transport_env
from components.k8s.jobs.tuning_sample import render_tuning_namespace
from stacks.environment.loader import load_environment
from stacks.tools.plan.admission.check import admission_report, check
from stacks.tools.plan.admission.nodes import cluster_model
from stacks.tools.plan.admission.rules import RuntimeClassModel
from stacks.tools.plan.admission.trainer import trainer_pods
from tests.components.k8s.addons.k8s_checks import validate_strict
from tests.program.conftest import edited_view, run_view, stack_view

# kubeflow/trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainingruntime_types.go, trainjob_types.go
RUNTIME_SPEC_FIELDS = {"mlPolicy", "podGroupPolicy", "template"}
ML_POLICY_FIELDS = {"numNodes", "torch", "mpi", "jax", "xgboost", "flux"}
TORCH_POLICY_FIELDS = {"envInjection"}
TRAINJOB_SPEC_FIELDS = {
    "runtimeRef",
    "initializer",
    "trainer",
    "runtimePatches",
    "suspend",
    "activeDeadlineSeconds",
    "managedBy",
}
RUNTIME_REF_FIELDS = {"name", "apiGroup", "kind"}
TRAINER_FIELDS = {"image", "command", "args", "env", "numNodes", "resourcesPerNode", "numProcPerNode"}
# kubernetes-sigs/jobset v0.12.0 api/jobset/v1alpha2/jobset_types.go ReplicatedJob
REPLICATED_JOB_FIELDS = {"name", "groupName", "template", "replicas", "dependsOn"}
# kubeflow/katib v0.19.0 pkg/apis/controller/experiments/v1beta1/experiment_types.go, common_types.go
EXPERIMENT_SPEC_FIELDS = {
    "parameters",
    "objective",
    "algorithm",
    "earlyStopping",
    "trialTemplate",
    "parallelTrialCount",
    "maxTrialCount",
    "maxFailedTrialCount",
    "metricsCollectorSpec",
    "nasConfig",
    "resumePolicy",
}
TRIAL_TEMPLATE_FIELDS = {
    "retain",
    "trialSpec",
    "configMap",
    "trialParameters",
    "primaryPodLabels",
    "primaryContainerName",
    "successCondition",
    "failureCondition",
}
PARAMETER_TYPES = {"int", "double", "categorical", "discrete"}


def _job(transport: str = "roce", katib: bool = True) -> TuningSampleJob:
    return TuningSampleJob(namespace="tuning", shape=WorkerShape(gpus=1, transport=transport), katib=katib)  # type: ignore[arg-type]


def _as_pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize("transport", ["roce", "tcp"])
def test_objects_have_the_upstream_fields_and_valid_pods(transport: str) -> None:
    job = _job(transport)
    configmap, runtime, experiment = render_tuning_objects(job)
    validate_strict(configmap)
    validate_strict(render_tuning_namespace(job))
    spec = runtime["spec"]
    assert set(spec) <= RUNTIME_SPEC_FIELDS and set(spec["mlPolicy"]) <= ML_POLICY_FIELDS
    assert set(spec["mlPolicy"]["torch"]) <= TORCH_POLICY_FIELDS
    [replicated] = spec["template"]["spec"]["replicatedJobs"]
    assert set(replicated) <= REPLICATED_JOB_FIELDS
    validate_strict(_as_pod(replicated["template"]["spec"]["template"]["spec"]))
    assert set(experiment["spec"]) <= EXPERIMENT_SPEC_FIELDS
    template = experiment["spec"]["trialTemplate"]
    assert set(template) <= TRIAL_TEMPLATE_FIELDS
    assert {p["parameterType"] for p in experiment["spec"]["parameters"]} <= PARAMETER_TYPES
    trainjob = template["trialSpec"]
    assert (trainjob["apiVersion"], trainjob["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert set(trainjob["spec"]) <= TRAINJOB_SPEC_FIELDS
    assert set(trainjob["spec"]["runtimeRef"]) <= RUNTIME_REF_FIELDS
    assert set(trainjob["spec"]["trainer"]) <= TRAINER_FIELDS
    # Every trial parameter a TrainJob uses is declared and refers to an Experiment parameter.
    declared = {p["name"] for p in template["trialParameters"]}
    assert "${trialParameters.batchSize}" in " ".join(trainjob["spec"]["trainer"]["command"])
    assert declared == {"batchSize"}
    assert {p["reference"] for p in template["trialParameters"]} == {"batch_size"}


@pytest.mark.parametrize("transport", ["roce", "tcp"])
def test_trial_pods_request_gpus_and_rdma_like_the_mpijob_workers(transport: str) -> None:
    job = _job(transport)
    objs = render_tuning_objects(job)
    count, pod = trainer_pods(objs[2]["spec"]["trialTemplate"]["trialSpec"]["spec"], "tuning", objs)  # type: ignore[misc]
    validate_strict(_as_pod(pod))
    mpi_worker = worker_template(image=job.image, shape=job.shape, labels={}, env={})["spec"]
    [node] = pod["containers"]
    [worker] = mpi_worker["containers"]
    assert count == job.nodes
    assert node["resources"]["limits"] == worker["resources"]["limits"]
    assert node["resources"]["requests"] == worker["resources"]["requests"]
    assert node["securityContext"] == worker["securityContext"]
    for key in ("runtimeClassName", "nodeSelector", "tolerations"):
        assert pod[key] == mpi_worker[key], key
    assert pod.get("hostNetwork", False) == mpi_worker.get("hostNetwork", False)
    env = {e["name"]: e["value"] for e in node["env"]}
    assert env == nccl_transport_env(transport)  # type: ignore[arg-type]
    assert node["command"][0] == "torchrun" and node["image"] == job.image


def test_upstream_deployments_are_placed_on_the_control_plane_and_katib_db_gets_the_class() -> None:
    upstream = {"metadata": {"name": "katib-mysql"}, "spec": {"template": {"spec": {"containers": []}}}}
    placed = place_on_control_plane("kubernetes:apps/v1:Deployment", upstream)
    assert placed is not None
    pod = placed["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert pod["tolerations"] == [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"}
    ]
    assert place_on_control_plane("kubernetes:core/v1:Service", upstream) is None
    claim = {
        "metadata": {"name": "katib-mysql", "namespace": KATIB_NAMESPACE},
        "spec": {"accessModes": ["ReadWriteOnce"]},
    }
    patched = with_storage_class("kubernetes:core/v1:PersistentVolumeClaim", claim, "fast")
    assert patched is not None and patched["spec"] == {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast"}
    with pytest.raises(ValueError, match="StorageClass"):
        KatibSettings(db_storage_class="")
    with pytest.raises(ValueError, match="not one of"):
        TrainerSettings(version="2.1.0")


# kubeflow/katib v0.19.0 manifests/v1beta1/components/mysql/secret.yaml: the sample root password
# ("test") that katib-mysql (MYSQL_ROOT_PASSWORD) and katib-db-manager (DB_PASSWORD) both read.
UPSTREAM_KATIB_SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "type": "Opaque",
    "metadata": {"name": "katib-mysql-secrets", "namespace": KATIB_NAMESPACE},
    "data": {"MYSQL_ROOT_PASSWORD": "dGVzdA=="},
}


def test_katibs_mysql_secret_gets_the_generated_password_not_upstreams_sample() -> None:
    password = "k" * 32
    patched = with_mysql_root_password("kubernetes:core/v1:Secret", UPSTREAM_KATIB_SECRET, password)
    assert patched is not None
    assert patched["data"] == {"MYSQL_ROOT_PASSWORD": base64.b64encode(password.encode()).decode()}
    assert patched["metadata"] == UPSTREAM_KATIB_SECRET["metadata"]
    other = {**UPSTREAM_KATIB_SECRET, "metadata": {"name": "katib-webhook-cert", "namespace": KATIB_NAMESPACE}}
    assert with_mysql_root_password("kubernetes:core/v1:Secret", other, password) is None
    assert with_mysql_root_password("kubernetes:core/v1:ConfigMap", UPSTREAM_KATIB_SECRET, password) is None


def test_katib_enabled_generates_its_mysql_root_password_as_a_secret() -> None:
    run = run_view(edited_view("dev", _enable), "dev")
    passwords = [r for r in run.resources if r.type == "random:index/randomPassword:RandomPassword"]
    katib = [r for r in passwords if "katib" in r.name]
    assert [r.name for r in katib] == ["kubeflow-tuning-katib-mysql-root"], [r.name for r in passwords]
    [tuning] = [r for r in run.resources if r.type == "gpucluster:kubernetes:KubeflowTuning"]
    assert katib[0].parent == tuning.urn
    # Alphanumeric: upstream's probes put it unquoted into `bash -c "mysql ... -p${MYSQL_ROOT_PASSWORD}"`.
    inputs = katib[0].redacted_inputs()
    assert inputs["length"] >= 32 and inputs["special"] is False


def _enable(env: dict[str, Any]) -> None:
    env["tuning"] = {"enabled": True, "katib": {"dbStorageClass": "vsphere-csi"}}
    env["kubernetes"]["gpuNodeTaint"] = False
    env["kubernetes"]["version"] = "1.34.2"  # Katib 0.19.0 is tested upstream on 1.31-1.34 only
    env["jobs"]["fabricCheck"]["enabled"] = False  # the sample wants the GPUs


def test_tuning_is_off_by_default() -> None:
    run = run_view(stack_view("dev"), "dev")
    assert not [r for r in run.resources if "KubeflowTuning" in r.type or "TuningSample" in r.type]


def test_enabled_sample_plans_pinned_releases_and_is_admitted() -> None:
    view = edited_view("dev", _enable)
    env = load_environment(view)
    run = run_view(view, "dev")
    directories = {
        r.name: r.redacted_inputs()["directory"] for r in run.resources if r.type == "kubernetes:kustomize/v2:Directory"
    }
    assert directories == {
        "kubeflow-tuning-trainer": "https://github.com/kubeflow/trainer/tree/v2.3.0/manifests/overlays/manager",
        "kubeflow-tuning-katib": "https://github.com/kubeflow/katib/tree/v0.19.0/manifests/v1beta1/installs/katib-standalone",
    }
    [sample] = [r for r in run.resources if r.type == "gpucluster:kubernetes:TuningSample"]
    [objects] = [r for r in run.resources if r.name == "tuning-objects"]
    # Depending on the component is recorded as depending on its children: both installs.
    installs = {r.urn for r in run.resources if r.type == "kubernetes:kustomize/v2:Directory"}
    assert installs <= set(objects.dependencies), "the sample must wait for the CRDs and webhooks"
    assert objects.parent == sample.urn
    report = admission_report(env, run)
    assert report.failures == [], report.lines()
    trials = [str(v) for v in report.verdicts if v.workload == "Experiment tuning/ddp-resnet50-tuning"]
    assert trials and trials[0].startswith("OK") and "2 pod(s)" in trials[0], report.lines()
    suggestion = [str(v) for v in report.verdicts if v.workload == "Deployment tuning/ddp-resnet50-tuning-random"]
    assert suggestion and suggestion[0].startswith("OK"), report.lines()


def test_trials_that_do_not_fit_and_a_tainted_cluster_are_refused() -> None:
    env = load_environment(stack_view("dev"))  # GPU workers tainted
    job = TuningSampleJob(namespace="tuning", shape=WorkerShape(gpus=1), nodes=3, parallel_trials=2, max_trials=2)
    objs: list[Any] = render_tuning_objects(job)
    nvidia = [RuntimeClassModel(name="nvidia", handler="nvidia")]
    # Device plugins are not in `objs`: no node advertises a GPU, so the trials fit nowhere.
    report = check(cluster_model(env), objs, nvidia)
    lines = {v.workload: str(v) for v in report.verdicts}
    assert lines["Deployment tuning/ddp-resnet50-tuning-random"].startswith("FAIL"), lines
    assert "untolerated taint nvidia.com/gpu" in lines["Deployment tuning/ddp-resnet50-tuning-random"]
    assert lines["Experiment tuning/ddp-resnet50-tuning"].startswith("FAIL"), lines
    assert "nvidia.com/gpu" in lines["Experiment tuning/ddp-resnet50-tuning"]


def test_a_trainjob_without_its_runtime_is_refused() -> None:
    env = load_environment(stack_view("dev"))
    objs = render_tuning_objects(_job(katib=False))
    report = check(cluster_model(env), [objs[0], objs[2]], [RuntimeClassModel(name="nvidia", handler="nvidia")])
    [verdict] = [str(v) for v in report.verdicts if v.workload == "TrainJob tuning/ddp-resnet50-tuning"]
    assert verdict.startswith("FAIL") and "TrainingRuntime 'gpucluster-torch' is not in the plan" in verdict


def test_experiment_maximises_the_metric_the_script_prints() -> None:
    experiment = render_experiment(_job())
    assert experiment["spec"]["objective"] == {"type": "maximize", "objectiveMetricName": "images_per_sec"}
    script = render_tuning_objects(_job())[0]["data"]["ddp_resnet50.py"]
    assert 'print(f"images_per_sec={total:.2f}"' in script
    assert render_runtime(_job())["spec"]["mlPolicy"] == {"numNodes": 2, "torch": {}}


def test_the_ports_a_tcp_job_takes_on_a_node_are_the_ones_the_docs_name() -> None:
    """docs/training-jobs.md tells operators which node ports a TCP job holds; the TrainJob's torchrun
    rendezvous is Trainer's ContainerTrainerPort, 29500 (kubeflow/trainer pkg/constants)."""
    from pathlib import Path

    from components.k8s.jobs.mpijob import SSH_PORT
    from components.k8s.jobs.pytorch_ddp import PytorchDdpJob
    from components.k8s.jobs.trainjob import TORCHRUN_PORT

    doc = (Path(__file__).resolve().parents[4] / "docs" / "training-jobs.md").read_text()
    # The sentence may open a line or follow another one ("While ..." or "...; while ...").
    after = re.split(r"while a TCP job runs, ports ", doc, maxsplit=1, flags=re.IGNORECASE)[1]
    sentence = " ".join(after.split("are taken on the nodes", 1)[0].split())
    assert sentence.startswith(f"{SSH_PORT} (the workers' sshd")
    assert f"and {TORCHRUN_PORT} (the PyTorch rendezvous" in sentence
    assert PytorchDdpJob.__dataclass_fields__["master_port"].default == TORCHRUN_PORT


def test_trainer_alone_plans_on_the_default_kubernetes() -> None:
    """Issue 51 item 8: tuning on the shipped 1.36.1. Katib 0.19.0 runs only up to 1.34 (validate
    names it), Trainer 2.3.0 is built for 1.36 (validate warns): Trainer alone plans, and is admitted."""

    def enable(env: dict[str, Any]) -> None:
        _enable(env)
        env["kubernetes"]["version"] = "1.36.1"
        env["tuning"]["katib"] = {"enabled": False}

    view = edited_view("dev", enable)
    env = load_environment(view)
    run = run_view(view, "dev")
    directories = [r.name for r in run.resources if r.type == "kubernetes:kustomize/v2:Directory"]
    assert directories == ["kubeflow-tuning-trainer"]
    assert admission_report(env, run).failures == []
